//! The history checker of the fault suite: reads what a run left in Postgres
//! (`workflow_runs`, `steps`, `step_attempts`) and the counters the runners printed at exit
//! (`rara scheduler --json`, `rara executor --json`), and names every way the history breaks
//! DESIGN.md "Lease ownership": a step with two committed outcomes, a fence that did not
//! grow, a step or run that never finished, a message nobody can account for, a concurrency
//! key that ran more attempts at once than its limit (DESIGN.md "Flow control").
//!
//! What the counters can and cannot prove:
//! - an executor that was SIGKILLed prints nothing: what it claimed and acknowledged is only
//!   visible in Postgres (its attempts), never in the message balance. With such kills the
//!   balance may only be positive (messages acknowledged by the dead), never negative;
//! - a scheduler that died prints nothing either: what it sent is unknown, and the balance
//!   can no longer be bounded from below (nor the claims counted exactly);
//! - a runner paused past its message's visibility may acknowledge a message another runner
//!   received and acknowledged too: the balance may be negative by at most what the paused
//!   runner held (one batch, [`MAX_BATCH`] messages, per pause);
//! - without kills and pauses the balance is exact: every message sent (by the schedulers
//!   or the test) was acknowledged by a runner, removed by the test, is still on the queue,
//!   or was moved to the DLQ by the redrive policy.

use std::collections::HashMap;

use rara_runtime::metrics::Counters;
use sqlx::PgPool;
use uuid::Uuid;

/// The most messages a runner holds at once (the largest SQS batch).
pub const MAX_BATCH: i64 = 10;

/// What the test knows about a run's messages besides the database.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    /// Counters printed at exit by every runner that exited cleanly (schedulers and executors).
    pub runners: Vec<Counters>,
    /// Messages the test put on the queue itself (duplicates, old tokens, poison).
    pub injected: u64,
    /// Messages the test received and deleted itself (messages "lost" on purpose).
    pub removed_by_test: u64,
    /// Messages still on the queue at the end (visible, in flight or delayed), runners stopped.
    pub left_on_queue: u64,
    /// Messages that reached the DLQ (executor copies with a reason, and redrive moves).
    pub on_dlq: u64,
    /// Executor processes that were SIGKILLed (their counters died with them).
    pub killed_executors: u64,
    /// Scheduler processes that died without printing their counters.
    pub lost_schedulers: u64,
    /// Times a runner was paused (SIGSTOP) past its lease and then resumed.
    pub pauses: u64,
    /// Times Postgres went silent to the runners (a black hole in front of it): answers to
    /// calls in flight were lost, so what those calls committed (a claim, a success) the
    /// runners did not count, as with a killed executor.
    pub postgres_silences: u64,
}

/// A broken rule, with what broke it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub rule: &'static str,
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.rule, self.detail)
    }
}

/// The numbers of one checked history, and what broke.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub runs: u64,
    pub runs_unfinished: u64,
    pub steps: u64,
    pub steps_succeeded: u64,
    pub steps_failed: u64,
    /// Steps that did not end terminal (must be 0).
    pub lost_steps: u64,
    pub attempts: u64,
    pub attempts_succeeded: u64,
    pub attempts_lease_expired: u64,
    /// Steps with more than one committed outcome, or a success the holder of the last fence
    /// did not write (must be 0).
    pub duplicate_outcomes: u64,
    /// Summed counters of the runners that exited cleanly.
    pub counters: Counters,
    pub injected: u64,
    pub removed_by_test: u64,
    pub left_on_queue: u64,
    pub on_dlq: u64,
    /// Receipts the clean runners acknowledged (received and not returned).
    pub acknowledged: u64,
    /// sent + injected − removed by the test − acknowledged − left on the queue − redriven.
    pub message_balance: i64,
    /// The part of the balance no injected fault explains (must be 0).
    pub messages_unaccounted: i64,
    pub violations: Vec<Violation>,
}

impl Report {
    /// Every broken rule; empty when the history is clean.
    pub fn check(&self) -> Vec<Violation> {
        self.violations.clone()
    }
}

/// Parses the counters a runner printed with `--json` (its last JSON line on stdout).
/// `None` when there is none or a counter is missing.
pub fn parse_counters(stdout: &str) -> Option<Counters> {
    let line = stdout.lines().rev().find(|l| l.trim_start().starts_with('{'))?;
    serde_json::from_str(line).ok()
}

mod counters;
mod run;
mod step;

use counters::check_counters;
use run::{RunRow, check_run};
use step::{AttemptRow, StepRow, check_step};

/// The store's database error as sqlx's (the checker's error type).
fn store_error(e: rara_store::Error) -> sqlx::Error {
    match e {
        rara_store::Error::Database(e) => e,
        other => sqlx::Error::Protocol(other.to_string()),
    }
}

/// Reads the history of the database behind `pool` and checks it against `ledger`.
pub async fn check(pool: &PgPool, ledger: &Ledger) -> Result<Report, sqlx::Error> {
    let steps: Vec<StepRow> =
        sqlx::query_as("SELECT id, status::text AS status, attempt, fence FROM steps").fetch_all(pool).await?;
    let attempts: Vec<AttemptRow> = sqlx::query_as(
        "SELECT step_id, attempt, fence, outcome::text AS outcome FROM step_attempts ORDER BY step_id, attempt",
    )
    .fetch_all(pool)
    .await?;
    let runs: Vec<RunRow> = sqlx::query_as(
        "SELECT w.id, w.status::text AS status, w.steps_unfinished, w.steps_total,
                (SELECT count(*) FROM steps s WHERE s.run_id = w.id AND s.status = 'succeeded') AS succeeded
         FROM workflow_runs w",
    )
    .fetch_all(pool)
    .await?;

    let mut report = Report { runs: runs.len() as u64, steps: steps.len() as u64, ..Report::default() };
    let mut by_step: HashMap<Uuid, Vec<&AttemptRow>> = HashMap::new();
    for a in &attempts {
        by_step.entry(a.step_id).or_default().push(a);
        report.attempts += 1;
        match a.outcome.as_str() {
            "succeeded" => report.attempts_succeeded += 1,
            "lease_expired" => report.attempts_lease_expired += 1,
            _ => {}
        }
    }
    let mut v = Vec::new();
    for step in &steps {
        check_step(step, by_step.get(&step.id).map(Vec::as_slice).unwrap_or(&[]), &mut report, &mut v);
    }
    for run in &runs {
        check_run(run, &mut report, &mut v);
    }
    check_counters(&attempts, ledger, &mut report, &mut v);
    for o in rara_store::Store::new(pool.clone()).limit_overruns().await.map_err(store_error)? {
        v.push(Violation {
            rule: "no key holds more than its limit",
            detail: format!("{} ran {} attempts at {} (limit {})", o.name, o.running, o.at, o.limit),
        });
    }
    report.violations = v;
    Ok(report)
}
