//! An operator's schedules, as the CLI and the API create, trigger and backfill them. A schedule
//! is checked at create as its slots' runs will be: its calendar, its bounds, its workflow (which
//! must be registered) planned with its inputs for a slot. A trigger makes one run now, outside
//! the calendar and its overlap policy; a backfill makes one run per slot of a range (at most
//! [`MAX_BACKFILL`]), each with the slot's key, so a second backfill makes none.

use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use rara_domain::config::Config;
use rara_domain::schedule::{self, Calendar, MAX_BACKFILL, Overlap, Slot, Spec};
use rara_domain::workflow::{self, MAX_NAME_LEN, WorkflowDefinition, WorkflowRef};
use rara_store::Store;
use rara_store::schedules::{NewSchedule, ScheduleSpec, ScheduleView};
use rara_store::submit::Origin;
use uuid::Uuid;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] rara_store::Error),
    /// The workflow does not plan with the schedule's inputs.
    #[error(transparent)]
    Workflow(#[from] workflow::Error),
    #[error(transparent)]
    Invalid(#[from] schedule::Error),
    /// A backfill of more slots than [`MAX_BACKFILL`]: nothing was made.
    #[error("the range holds {count} slots; a backfill makes at most {limit} (split the range)")]
    TooManySlots { count: usize, limit: usize },
}

/// A schedule to create.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateSchedule {
    pub name: String,
    /// `NAME` or `NAME@latest` follows the newest version; `NAME@3` pins one.
    pub workflow: WorkflowRef,
    pub spec: Spec,
    pub timezone: String,
    pub inputs: serde_json::Map<String, serde_json::Value>,
    pub overlap: Overlap,
    pub catchup_window: Duration,
    pub jitter: Duration,
}

/// Which executors run in-process, as submit asks (`Registry::in_process`).
pub type InProcess<'a> = &'a (dyn Fn(&str, Option<&str>) -> bool + Sync);

/// Creates the schedule, checked; it as stored.
pub async fn create(
    store: &Store,
    config: &Config,
    in_process: InProcess<'_>,
    new: CreateSchedule,
) -> Result<ScheduleView, Error> {
    check_name(&new.name)?;
    let calendar = Calendar::new(&new.spec, &new.timezone)?;
    let catchup = schedule::bounded("catchup_window", new.catchup_window, schedule::MAX_CATCHUP_WINDOW)?;
    let jitter = schedule::bounded("jitter", new.jitter, schedule::MAX_JITTER)?;
    let now = Utc::now();
    let next = calendar.next_after(now).ok_or_else(|| invalid("cron", "the pattern matches no future date"))?;
    let id = Uuid::now_v7();
    let (definition, _) = definition_of(store, &new.workflow.name, new.workflow.version).await?;
    let slot = Slot { schedule_id: id, schedule: &new.name, inputs: &new.inputs, at: next };
    schedule::plan_slot(&definition, &slot, config, in_process)?;
    let (cron, every_ms) = match &new.spec {
        Spec::Cron(cron) => (Some(cron.clone()), None),
        Spec::Every(every) => (None, Some(every.as_millis() as i64)),
    };
    store
        .create_schedule(&NewSchedule {
            id,
            name: new.name.clone(),
            spec: ScheduleSpec {
                workflow: new.workflow.name,
                workflow_version: new.workflow.version,
                cron,
                every_ms,
                timezone: new.timezone,
                inputs: serde_json::Value::Object(new.inputs),
                overlap: new.overlap.as_str().to_owned(),
                catchup_window_ms: catchup.as_millis() as i64,
                jitter_ms: jitter.as_millis() as i64,
            },
            next_slot_at: next,
            next_fire_at: next + chrono::Duration::from_std(schedule::jitter(id, next, jitter)).unwrap_or_default(),
        })
        .await?;
    Ok(store.schedule(&new.name).await?)
}

/// What a trigger or a backfill made.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Fired {
    /// The slots of the range (a trigger: one, now).
    pub slots: usize,
    /// New runs; the other slots had theirs already.
    pub created: usize,
    /// The run of each slot, in order.
    pub runs: Vec<Uuid>,
}

/// One run of the schedule `name` now, outside its calendar and its overlap policy; it becomes
/// the run the overlap policy looks at.
pub async fn trigger(store: &Store, config: &Config, in_process: InProcess<'_>, name: &str) -> Result<Fired, Error> {
    let view = store.schedule(name).await?;
    let slot = Utc::now().trunc_subsecs(3);
    let fired = fire(store, config, in_process, &view, &[slot]).await?;
    store.schedule_fired(view.id, fired.created as u64, fired.runs.first().map(|&run| (run, slot))).await?;
    Ok(fired)
}

/// One run per slot of the schedule `name` in `[from, to)`, each with the slot's key (slots that
/// have a run keep it); more than [`MAX_BACKFILL`] slots is [`Error::TooManySlots`].
pub async fn backfill(
    store: &Store,
    config: &Config,
    in_process: InProcess<'_>,
    name: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Fired, Error> {
    let view = store.schedule(name).await?;
    let spec = schedule::spec_of(view.spec.cron.as_deref(), view.spec.every_ms)?;
    let calendar = Calendar::new(&spec, &view.spec.timezone)?;
    let slots = calendar.slots_between(from, to, MAX_BACKFILL).ok_or_else(|| Error::TooManySlots {
        count: calendar.count_between(from, to, 100 * MAX_BACKFILL),
        limit: MAX_BACKFILL,
    })?;
    let fired = fire(store, config, in_process, &view, &slots).await?;
    store.schedule_fired(view.id, fired.created as u64, None).await?;
    Ok(fired)
}

/// The runs of `slots`, each submitted with its slot's key.
async fn fire(
    store: &Store,
    config: &Config,
    in_process: InProcess<'_>,
    view: &ScheduleView,
    slots: &[DateTime<Utc>],
) -> Result<Fired, Error> {
    let (definition, version) = definition_of(store, &view.spec.workflow, view.spec.workflow_version).await?;
    let inputs = view.spec.inputs.as_object().cloned().unwrap_or_default();
    let mut fired = Fired { slots: slots.len(), created: 0, runs: Vec::with_capacity(slots.len()) };
    for &at in slots {
        let slot = Slot { schedule_id: view.id, schedule: &view.name, inputs: &inputs, at };
        let plan = schedule::plan_slot(&definition, &slot, config, in_process)?;
        let origin = Origin { workflow_version: Some(version), schedule: Some((view.id, at)), run_id: None };
        let run = match store.submit_from(&plan, None, origin).await {
            Ok(submitted) => {
                fired.created += usize::from(submitted.created);
                submitted.run_id
            }
            // The slot's run exists, made with other inputs (the schedule's or the workflow's changed).
            Err(rara_store::Error::IdempotencyConflict { run_id, .. }) => run_id,
            Err(e) => return Err(e.into()),
        };
        fired.runs.push(run);
    }
    Ok(fired)
}

/// The registered definition a schedule runs, parsed, with its version.
async fn definition_of(store: &Store, name: &str, version: Option<i32>) -> Result<(WorkflowDefinition, i32), Error> {
    let found = store.definition(name, version).await?;
    let definition = serde_json::from_value(found.definition).map_err(workflow::Error::from)?;
    Ok((definition, found.version))
}

/// A schedule name: 1 to [`MAX_NAME_LEN`] characters of letters, digits and `- _ . :`.
fn check_name(name: &str) -> Result<(), Error> {
    let valid = name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
    if name.is_empty() || name.len() > MAX_NAME_LEN || !valid {
        return Err(invalid(
            "name",
            &format!("{name:?}: 1 to {MAX_NAME_LEN} characters of letters, digits and - _ . :"),
        ));
    }
    Ok(())
}

fn invalid(field: &'static str, message: &str) -> Error {
    Error::Invalid(schedule::Error { field, message: message.to_owned() })
}
