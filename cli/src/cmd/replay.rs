//! `rara replay`: one new run per finished run a filter matches, with the same inputs, or with
//! `--from-failed` a rerun from each one's first failed step (docs/src/guide/recover.md). Once
//! per run however often asked; `--dry-run` counts first. At most 1,000 runs a call.

use chrono::{DateTime, NaiveDate, Utc};
use clap::Args;
use rara_domain::state::RunStatus;
use rara_operator::replay::{Replayed, replay};
use rara_store::browse::RunFilter;

use crate::Failure;
use crate::exit::ExitCode;

/// Replay the finished runs a filter matches: a new run each (same inputs), or with
/// --from-failed a rerun from its first failed step. Once per run; --dry-run counts.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Only runs that ended so: failed, cancelled or succeeded.
    #[arg(long, value_parser = status)]
    pub(crate) status: Option<RunStatus>,
    /// Only runs of this workflow name.
    #[arg(long)]
    pub(crate) name: Option<String>,
    /// Only runs created at or after this time (RFC 3339, or a date: its midnight UTC).
    #[arg(long, value_parser = moment)]
    pub(crate) since: Option<DateTime<Utc>>,
    /// Only runs created before this time (RFC 3339, or a date).
    #[arg(long, value_parser = moment)]
    pub(crate) until: Option<DateTime<Utc>>,
    /// A rerun from each run's first failed step (its earlier steps carried over) instead of
    /// a new run of every step; runs with no failed step are left alone.
    #[arg(long)]
    pub(crate) from_failed: bool,
    /// Count what would be replayed; make nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
}

fn status(text: &str) -> Result<RunStatus, String> {
    match serde_json::from_value::<RunStatus>(serde_json::Value::String(text.to_owned())) {
        Ok(RunStatus::Running) => Err("running runs are not replayed: a replay is of a finished run".to_owned()),
        Ok(status) => Ok(status),
        Err(_) => Err(format!("{text:?} is not a run status (failed, cancelled, succeeded)")),
    }
}

fn moment(text: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
        .ok_or_else(|| format!("{text:?} is neither an RFC 3339 time nor a date (2026-12-01)"))
}

pub async fn run(args: ReplayArgs, json: bool) -> Result<(), Failure> {
    let store = super::connect(&super::config()?).await?;
    let filter = RunFilter {
        status: args.status,
        name: args.name,
        created_after: args.since,
        created_before: args.until,
        ..RunFilter::default()
    };
    let done = replay(&store, &filter, args.from_failed, args.dry_run).await.map_err(|e| match e {
        rara_operator::bulk::Error::TooMany { .. } => Failure::new(ExitCode::Usage, e),
        rara_operator::bulk::Error::Store(e) => e.into(),
    })?;
    if json {
        println!("{}", report_json(&done, args.dry_run));
    } else {
        print!("{}", report(&done, args.dry_run));
    }
    Ok(())
}

fn report_json(done: &Replayed, dry_run: bool) -> serde_json::Value {
    serde_json::json!({
        "matched": done.matched, "already": done.already, "made": done.made,
        "nothing_failed": done.nothing_failed, "dry_run": dry_run,
        "refused": done.refused.iter().map(|(id, why)| serde_json::json!({"run_id": id, "why": why})).collect::<Vec<_>>(),
        "runs": done.runs.iter().map(|(original, id)| serde_json::json!({"original": original, "id": id})).collect::<Vec<_>>(),
    })
}

fn report(done: &Replayed, dry_run: bool) -> String {
    let left = done.matched - done.already - done.nothing_failed;
    let mut out = if dry_run {
        format!("{} runs match; {left} would be replayed ({} replayed before", done.matched, done.already)
    } else {
        format!("{} runs match; {} replayed now ({} replayed before", done.matched, done.made, done.already)
    };
    if done.nothing_failed > 0 {
        out.push_str(&format!(", {} with no failed step", done.nothing_failed));
    }
    out.push_str(")\n");
    for (original, id) in &done.runs {
        out.push_str(&format!("{original} -> {id}\n"));
    }
    for (id, why) in &done.refused {
        out.push_str(&format!("{id}: refused: {why}\n"));
    }
    out
}
