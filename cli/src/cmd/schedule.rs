//! `rara schedule`: registered workflows run by the scheduler at each slot of a calendar.
//! `create NAME --workflow W[@V] (--cron EXPR | --every DURATION)` with a time zone, run inputs
//! (`--input-json 'night={"$schedule": "/slot_time"}'` reads the slot's time), an overlap
//! policy, a catch-up window and jitter; `list`; `pause`, `resume`, `delete NAME`; `trigger NAME`
//! (one run now); `backfill NAME --from T --to T` (one run per slot of the range, at most
//! `MAX_BACKFILL`; the slots' keys make a second backfill add nothing).

use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use clap::{Args, Subcommand};
use rara_domain::human::parse_duration;
use rara_domain::schedule::{Overlap, Spec};
use rara_domain::workflow::{WorkflowDefinition, WorkflowRef};
use rara_operator::schedules::{self, CreateSchedule, Error};

use super::submit::InputArgs;
use crate::exit::ExitCode;
use crate::{Failure, table};

/// Schedules: create, list, pause, resume, delete, trigger, backfill.
#[derive(Debug, Args)]
pub struct Schedule {
    #[command(subcommand)]
    command: ScheduleCommand,
}

#[derive(Debug, Subcommand)]
enum ScheduleCommand {
    /// Run a registered workflow at each slot of a calendar: a five-field cron (`--cron "0 2 * *
    /// *"`, read in `--timezone`) or `--every 30s`.
    Create(Create),
    /// The schedules: workflow, spec, zone, next fire, last run and its status, paused.
    List,
    /// Stop firing the schedule's slots (they are decided at resume: within the catch-up window
    /// they fire, older ones are missed).
    Pause { name: String },
    /// Fire the schedule's slots again.
    Resume { name: String },
    /// Delete the schedule (its runs stay).
    Delete { name: String },
    /// One run now, outside the calendar and the overlap policy.
    Trigger { name: String },
    /// One run per slot in `[--from, --to)`, with the slots' keys (a slot that has a run keeps it).
    Backfill {
        name: String,
        /// The first instant of the range (`2026-12-01T00:00Z`, `2026-12-01`; UTC unless an offset is given).
        #[arg(long, value_parser = instant)]
        from: DateTime<Utc>,
        /// The end of the range, not included.
        #[arg(long, value_parser = instant)]
        to: DateTime<Utc>,
    },
}

#[derive(Debug, Args)]
struct Create {
    name: String,
    /// The registered workflow: `NAME` or `NAME@latest` runs the newest version at each slot,
    /// `NAME@VERSION` that version.
    #[arg(long, value_name = "NAME[@VERSION]")]
    workflow: WorkflowRef,
    /// Five fields: minute hour day-of-month month day-of-week (names and ranges: `0 9-17 * * MON-FRI`).
    #[arg(long, required_unless_present = "every", conflicts_with = "every")]
    cron: Option<String>,
    /// A slot every DURATION (`30s`, `15m`, `1h`), counted from the Unix epoch.
    #[arg(long, value_parser = parse_duration)]
    every: Option<Duration>,
    /// The IANA time zone the cron is read in (`Europe/Berlin`).
    #[arg(long, default_value = "UTC")]
    timezone: String,
    /// When a slot comes while the previous run is going: skip, buffer_one, allow, cancel_previous.
    #[arg(long, default_value = "skip")]
    overlap: Overlap,
    /// Slots missed (downtime, a pause) within this fire; older ones are counted as missed.
    #[arg(long, value_parser = parse_duration, default_value = "1h")]
    catchup_window: Duration,
    /// Each slot fires up to this long after its time (spreads schedules that share a time).
    #[arg(long, value_parser = parse_duration, default_value = "0s")]
    jitter: Duration,
    #[command(flatten)]
    input: InputArgs,
}

/// How many schedules `list` shows.
const LIST_LIMIT: u32 = 1000;

/// An instant: RFC 3339, or without seconds (`2026-12-01T00:00Z`), or a date (midnight UTC).
fn instant(text: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    let naive = text.trim_end_matches('Z');
    NaiveDateTime::parse_from_str(naive, "%Y-%m-%dT%H:%M")
        .or_else(|_| NaiveDate::parse_from_str(naive, "%Y-%m-%d").map(|d| d.and_time(chrono::NaiveTime::MIN)))
        .map(|t| t.and_utc())
        .map_err(|_| format!("{text:?}: expected 2026-12-01T00:00Z, an RFC 3339 time or a date"))
}

/// The exit code of each failure of a schedule action.
fn failure(e: Error) -> Failure {
    match e {
        Error::Store(e) => Failure::from(e),
        Error::Workflow(e) => Failure::from(e),
        e @ (Error::Invalid(_) | Error::TooManySlots { .. }) => Failure::new(ExitCode::Usage, e),
    }
}

pub async fn run(args: Schedule, json: bool) -> Result<(), Failure> {
    let config = super::config()?;
    let store = super::connect(&config).await?;
    let builtins = rara_builtins::registry()?;
    let in_process = |op: &str, version: Option<&str>| builtins.in_process(op, version).is_some();
    let print = |value: serde_json::Value, text: String| {
        if json { println!("{value}") } else { println!("{text}") }
    };
    match args.command {
        ScheduleCommand::Create(create) => {
            let found = store.definition(&create.workflow.name, create.workflow.version).await?;
            let declared: WorkflowDefinition =
                serde_json::from_value(found.definition).map_err(rara_domain::workflow::Error::from)?;
            let inputs = create.input.given(&declared.inputs)?;
            let spec = match (create.cron, create.every) {
                (Some(cron), _) => Spec::Cron(cron),
                (None, Some(every)) => Spec::Every(every),
                (None, None) => return Err(Failure::new(ExitCode::Usage, "give --cron or --every")),
            };
            let new = CreateSchedule {
                name: create.name,
                workflow: create.workflow,
                spec,
                timezone: create.timezone,
                inputs,
                overlap: create.overlap,
                catchup_window: create.catchup_window,
                jitter: create.jitter,
            };
            let view = schedules::create(&store, &config, &in_process, new).await.map_err(failure)?;
            let text = format!("created schedule {}: next slot {}", view.name, view.next_slot_at.to_rfc3339());
            print(serde_json::to_value(&view).context("cannot encode the schedule")?, text);
        }
        ScheduleCommand::List => {
            let views = store.schedules(LIST_LIMIT).await?;
            if json {
                println!("{}", serde_json::to_string(&views).context("cannot encode the schedules")?);
            } else {
                print!("{}", table::schedules(&views));
            }
        }
        ScheduleCommand::Pause { name } => {
            store.set_schedule_paused(&name, true).await?;
            print(serde_json::json!({"name": name, "paused": true}), format!("paused schedule {name}"));
        }
        ScheduleCommand::Resume { name } => {
            store.set_schedule_paused(&name, false).await?;
            print(serde_json::json!({"name": name, "paused": false}), format!("resumed schedule {name}"));
        }
        ScheduleCommand::Delete { name } => {
            store.delete_schedule(&name).await?;
            print(serde_json::json!({"name": name, "deleted": true}), format!("deleted schedule {name}"));
        }
        ScheduleCommand::Trigger { name } => {
            let fired = schedules::trigger(&store, &config, &in_process, &name).await.map_err(failure)?;
            let run = fired.runs.first().map(ToString::to_string).unwrap_or_default();
            print(serde_json::to_value(&fired).context("cannot encode the answer")?, run);
        }
        ScheduleCommand::Backfill { name, from, to } => {
            let fired = schedules::backfill(&store, &config, &in_process, &name, from, to).await.map_err(failure)?;
            let text = format!("backfilled {} slots of {name}: {} new runs", fired.slots, fired.created);
            print(serde_json::to_value(&fired).context("cannot encode the answer")?, text);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_as_an_operator_writes_them() {
        let midnight = DateTime::parse_from_rfc3339("2026-12-01T00:00:00Z").unwrap().with_timezone(&Utc);
        for text in ["2026-12-01T00:00Z", "2026-12-01T00:00:00Z", "2026-12-01", "2026-12-01T01:00:00+01:00"] {
            assert_eq!(instant(text), Ok(midnight), "{text}");
        }
        assert!(instant("yesterday").is_err());
    }
}
