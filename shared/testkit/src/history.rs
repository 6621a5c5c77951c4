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

#[derive(sqlx::FromRow)]
struct StepRow {
    id: Uuid,
    status: String,
    attempt: i32,
    fence: Option<i64>,
}

#[derive(sqlx::FromRow)]
struct AttemptRow {
    step_id: Uuid,
    attempt: i32,
    fence: i64,
    outcome: String,
}

#[derive(sqlx::FromRow)]
struct RunRow {
    id: Uuid,
    status: String,
    steps_unfinished: i32,
    steps_total: i32,
    succeeded: i64,
}

/// The store's database error as sqlx's (the checker's error type).
fn store_error(e: rara_store::Error) -> sqlx::Error {
    match e {
        rara_store::Error::Database(e) => e,
        other => sqlx::Error::Protocol(other.to_string()),
    }
}

const TERMINAL: [&str; 4] = ["succeeded", "failed", "cancelled", "skipped"];

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

fn check_step(step: &StepRow, attempts: &[&AttemptRow], report: &mut Report, v: &mut Vec<Violation>) {
    let id = step.id;
    match step.status.as_str() {
        "succeeded" => report.steps_succeeded += 1,
        "failed" => report.steps_failed += 1,
        _ => {}
    }
    if !TERMINAL.contains(&step.status.as_str()) {
        report.lost_steps += 1;
        v.push(Violation { rule: "every step ends terminal", detail: format!("step {id} is {}", step.status) });
    }
    // Attempts are numbered 1..=n with n = steps.attempt, and every claim took a larger fence.
    let numbers: Vec<i32> = attempts.iter().map(|a| a.attempt).collect();
    if numbers != (1..=step.attempt).collect::<Vec<_>>() {
        v.push(Violation {
            rule: "one attempt row per counted attempt",
            detail: format!("step {id} counts {} attempts, rows {numbers:?}", step.attempt),
        });
    }
    for pair in attempts.windows(2) {
        if pair[1].fence <= pair[0].fence {
            v.push(Violation {
                rule: "fences strictly grow per step",
                detail: format!(
                    "step {id}: attempt {} fence {} after attempt {} fence {}",
                    pair[1].attempt, pair[1].fence, pair[0].attempt, pair[0].fence
                ),
            });
        }
    }
    let committed: Vec<&&AttemptRow> =
        attempts.iter().filter(|a| a.outcome == "succeeded" || a.outcome == "failed").collect();
    let successes = attempts.iter().filter(|a| a.outcome == "succeeded").count();
    let mut duplicate = false;
    if committed.len() > 1 || successes > 1 {
        duplicate = true;
        v.push(Violation {
            rule: "at most one committed outcome per step",
            detail: format!(
                "step {id}: {} committed outcomes ({successes} successes) in attempts {:?}",
                committed.len(),
                committed.iter().map(|a| a.attempt).collect::<Vec<_>>()
            ),
        });
    }
    let last = attempts.last();
    if let Some(c) = committed.first()
        && last.is_some_and(|l| l.attempt != c.attempt)
    {
        duplicate = true;
        v.push(Violation {
            rule: "a committed outcome ends the step",
            detail: format!("step {id}: attempt {} committed, later attempts ran", c.attempt),
        });
    }
    if step.status == "succeeded" {
        let landed = last.is_some_and(|l| l.outcome == "succeeded" && Some(l.fence) == step.fence);
        if !landed {
            duplicate = true;
            v.push(Violation {
                rule: "a success is written by the holder of the last fence",
                detail: format!(
                    "step {id} succeeded under fence {:?}; last attempt {:?}",
                    step.fence,
                    last.map(|l| (l.attempt, l.fence, l.outcome.as_str()))
                ),
            });
        }
    }
    if step.status == "failed" && !last.is_some_and(|l| l.outcome == "failed" || l.outcome == "lease_expired") {
        v.push(Violation {
            rule: "a failure closes the last attempt",
            detail: format!("step {id} failed; last attempt {:?}", last.map(|l| l.outcome.as_str())),
        });
    }
    let running: Vec<i32> = attempts.iter().filter(|a| a.outcome == "running").map(|a| a.attempt).collect();
    let may_run = step.status == "running" && running.len() == 1 && last.is_some_and(|l| l.outcome == "running");
    if !running.is_empty() && !may_run {
        v.push(Violation {
            rule: "only the current holder's attempt is open",
            detail: format!("step {id} is {} with open attempts {running:?}", step.status),
        });
    }
    if duplicate {
        report.duplicate_outcomes += 1;
    }
}

fn check_run(run: &RunRow, report: &mut Report, v: &mut Vec<Violation>) {
    let id = run.id;
    if run.status == "running" {
        report.runs_unfinished += 1;
        v.push(Violation { rule: "every run ends terminal", detail: format!("run {id} is still running") });
    } else if run.steps_unfinished != 0 {
        v.push(Violation {
            rule: "a finished run has no unfinished steps",
            detail: format!("run {id} is {} with {} unfinished", run.status, run.steps_unfinished),
        });
    }
    let all_succeeded = run.succeeded == i64::from(run.steps_total);
    if (run.status == "succeeded") != all_succeeded && run.status != "running" {
        v.push(Violation {
            rule: "a run succeeds exactly when all its steps do",
            detail: format!("run {id} is {} with {}/{} steps succeeded", run.status, run.succeeded, run.steps_total),
        });
    }
}

fn check_counters(attempts: &[AttemptRow], ledger: &Ledger, report: &mut Report, v: &mut Vec<Violation>) {
    let mut total = Counters::default();
    for (i, c) in ledger.runners.iter().enumerate() {
        total += *c;
        // Every received step (one per message, or several: `packed`) gets exactly one fate.
        // The counters do not name every fate (a claim or DLQ failure only shows in
        // `unsettled`), so this is a pair of bounds.
        let steps = c.received + c.packed;
        let fated = c.claimed + c.stale + c.held + c.dead_lettered;
        if steps < fated || steps > c.claimed + c.stale + c.dead_lettered + c.unsettled + c.moved {
            v.push(Violation {
                rule: "every received message gets one fate",
                detail: format!("runner {i}: received {steps} steps but {c:?}"),
            });
        }
        // A message is deleted only for a settled fate: an outcome recorded (success, failure
        // for good, retry in Postgres, a map expanded), a step given back by a stopping runner
        // (released in Postgres, fenced), a lost lease, a stale verdict, a dead letter, or a
        // step of a packed message moved into a message of its own. Counted per step: a
        // packed message is deleted when each of its steps is settled. Anything else (a panic,
        // an outcome that did not land) comes back.
        let acknowledged = steps.saturating_sub(c.unsettled);
        // `released` also counts a scheduler's leases given back after failed sends; only an
        // executor (a runner that receives messages) gives back steps it claimed.
        let released = if c.received > 0 { c.released } else { 0 };
        let settled = c.succeeded
            + c.failed
            + c.deferred
            + c.expanded
            + released
            + c.lease_lost
            + c.stale
            + c.dead_lettered
            + c.moved;
        if acknowledged != settled {
            v.push(Violation {
                rule: "a message is acknowledged only for a settled fate",
                detail: format!("runner {i}: acknowledged {acknowledged} but settled {settled} ({c:?})"),
            });
        }
        // Every claim ends in at most one recorded outcome (or lease lost, or comes back).
        let ended = c.succeeded + c.failed + c.retried + c.expanded + released + c.lease_lost;
        // (A claimed step moved into a message of its own was retried or parked.)
        if ended > c.claimed || c.claimed > ended + c.unsettled + c.moved {
            v.push(Violation {
                rule: "every claim ends once",
                detail: format!("runner {i}: claimed {} but ended {ended} ({c:?})", c.claimed),
            });
        }
        // A scheduler sends at most a message per step it sent; an executor one per step moved.
        if c.sent > c.leased || c.messages > c.sent + c.moved {
            v.push(Violation {
                rule: "a message is sent per lease",
                detail: format!(
                    "runner {i}: sent {} steps and moved {} in {} messages, leased {}",
                    c.sent, c.moved, c.messages, c.leased
                ),
            });
        }
    }
    // Counters against the database: each claim opens one attempt row (a re-attach to a
    // detached attempt opens none), each recorded success closes one. Runners killed before
    // exiting claimed (and recorded) without counting, and so did calls whose answers a
    // silent Postgres peer swallowed.
    // (Skipped when no runner counters were given: a history written without runners.)
    let rows = attempts.len() as u64;
    let successes = attempts.iter().filter(|a| a.outcome == "succeeded").count() as u64;
    let exact = ledger.killed_executors == 0 && ledger.postgres_silences == 0;
    let opened = total.claimed.saturating_sub(total.reattached);
    for (what, db, counted) in [("claims", rows, opened), ("successes", successes, total.succeeded)] {
        if !ledger.runners.is_empty() && ((exact && db != counted) || db < counted) {
            v.push(Violation {
                rule: "runner counters match the attempt history",
                detail: format!("{what}: {db} in step_attempts, {counted} counted by the runners"),
            });
        }
    }

    report.counters = total;
    report.injected = ledger.injected;
    report.removed_by_test = ledger.removed_by_test;
    report.left_on_queue = ledger.left_on_queue;
    report.on_dlq = ledger.on_dlq;
    report.acknowledged = total.received.saturating_sub(total.returned);
    let redriven = ledger.on_dlq as i64 - total.dead_lettered as i64;
    let balance = (total.messages + ledger.injected) as i64
        - ledger.removed_by_test as i64
        - report.acknowledged as i64
        - ledger.left_on_queue as i64
        - redriven;
    report.message_balance = balance;
    let low = if ledger.lost_schedulers > 0 { i64::MIN } else { -(ledger.pauses as i64) * MAX_BATCH };
    let high = if ledger.killed_executors > 0 { i64::MAX } else { 0 };
    report.messages_unaccounted = if balance < low {
        balance - low
    } else if balance > high {
        balance - high
    } else {
        0
    };
    if report.messages_unaccounted != 0 {
        v.push(Violation {
            rule: "every message is accounted for",
            detail: format!(
                "sent {} + injected {} - removed by the test {} - acknowledged {} - left on the queue {} - redriven {redriven} = {balance}, allowed {low}..={} ({} killed executors, {} pauses)",
                total.messages,
                ledger.injected,
                ledger.removed_by_test,
                report.acknowledged,
                ledger.left_on_queue,
                if high == i64::MAX { "∞".to_string() } else { high.to_string() },
                ledger.killed_executors,
                ledger.pauses
            ),
        });
    }
}
