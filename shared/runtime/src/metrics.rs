//! What one invocation did: its [`Counters`], and the executor's figures per operation
//! ([`OperationMetrics`]: outcomes, attempt duration, queue age). `rara-platform` prints them
//! as CloudWatch embedded-metric-format log lines (`rara_platform::metrics`).

use std::collections::BTreeMap;
use std::time::Duration;

use rara_domain::workflow::valid_operation;
use serde::{Deserialize, Serialize};

/// What one scheduler or executor invocation did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    pub received: u64,
    pub leased: u64,
    pub sent: u64,
    pub released: u64,
    pub reaped: u64,
    pub claimed: u64,
    pub stale: u64,
    pub held: u64,
    pub succeeded: u64,
    /// Executor: retries scheduled (both routes).
    pub retried: u64,
    /// Executor: retries beyond the visibility limit, recorded in Postgres; their messages
    /// were acknowledged (the scheduler sends a new one when the retry is due).
    pub deferred: u64,
    pub failed: u64,
    pub lease_lost: u64,
    pub dead_lettered: u64,
    /// Executor: executions that ended in a panic or a `JoinError` (recorded as a retryable
    /// `EXECUTOR_PANICKED` failure; their messages never acknowledged without an outcome).
    pub panicked: u64,
    pub returned: u64,
    /// Scheduler: lease statements run (including the one that found nothing due).
    pub lease_rounds: u64,
    /// Scheduler: reaper passes run (every `RARA_REAP_INTERVAL_MS`).
    pub reaper_runs: u64,
    /// Scheduler: waits ended early by a `NOTIFY` that steps became due.
    pub wakeups: u64,
    /// Scheduler: checks whether a hot table outgrew its planner statistics (one statement
    /// each, every `STATISTICS_INTERVAL`).
    pub statistics_checks: u64,
    /// Scheduler: tables analyzed because they outgrew their planner statistics.
    pub statistics_refreshes: u64,
    /// Executor: remote attempts parked at the invocation's end (they go on detached; their
    /// messages come back after the re-attach interval).
    pub parked: u64,
    /// Executor: claims that re-attached to a detached attempt (same attempt, same fence).
    pub reattached: u64,
    /// Scheduler: finished runs deleted by the retention (`RARA_RETENTION_DAYS`).
    pub pruned: u64,
    /// Executor: map steps expanded into their children (`for_each`).
    pub expanded: u64,
    /// Executor: quick steps run and recorded in the transaction of their lock (DESIGN.md
    /// "Quick steps"; also counted as claimed and succeeded).
    pub quick: u64,
    /// Executor: transactions opened to lock a batch's quick steps (none for a batch whose
    /// messages all say they name no quick operation: the `rara_operations` attribute).
    pub quick_locks: u64,
    /// Messages sent: the scheduler's (`sent` counts their steps; they differ when
    /// `RARA_STEPS_PER_MESSAGE` is above 1), and an executor's (`moved`).
    pub messages: u64,
    /// Executor: steps received beyond one per message (`received` counts messages): every
    /// received step gets one fate.
    pub packed: u64,
    /// Executor: steps of a message of several that had to come back (a retry, a hold, a
    /// park), moved into a message of their own, sent with that delay (their unit
    /// acknowledged; also counted in `messages`).
    pub moved: u64,
    /// Executor: received steps not acknowledged (each message of `returned` has at least
    /// one; equal to `returned` when every message names one step).
    pub unsettled: u64,
    /// Scheduler: steps that began to wait (durable waits: a timer, a signal, an event).
    pub waits_started: u64,
    /// Scheduler: waits it decided: by their timer or timeout, or by a signal or an event that
    /// was there when they began.
    pub waits_decided: u64,
    /// Scheduler: decided completions it applied to their steps (those of a resumed run, and
    /// its own decisions; a signal, event or token applies its own at once).
    pub waits_applied: u64,
    /// Scheduler: schedule slots that made a run (docs/src/guide/schedules.md).
    pub slots_fired: u64,
    /// Scheduler: schedule slots skipped by their overlap policy (the previous run still going).
    pub slots_skipped: u64,
    /// Scheduler: schedule slots older than their catch-up window when looked at.
    pub slots_missed: u64,
    /// Scheduler: schedule slots whose run could not be made (its definition gone or invalid).
    pub slots_failed: u64,
    /// Scheduler: signal and event waits whose timeout came (of `waits_decided`).
    pub waits_timed_out: u64,
    /// Scheduler: waits that ended (whoever decided them), each traced as a span.
    pub waits_ended: u64,
    /// Scheduler: runs past their deadline it timed out (`RUN_TIMED_OUT`).
    pub runs_timed_out: u64,
    /// Executor: child workflow runs made (each step that runs a workflow now waits for it).
    pub children_started: u64,
    /// Scheduler: child runs cancelled because their parent step stopped waiting for them.
    pub children_cancelled: u64,
}

impl std::ops::AddAssign for Counters {
    fn add_assign(&mut self, c: Counters) {
        self.received += c.received;
        self.messages += c.messages;
        self.packed += c.packed;
        self.unsettled += c.unsettled;
        self.moved += c.moved;
        self.leased += c.leased;
        self.sent += c.sent;
        self.released += c.released;
        self.reaped += c.reaped;
        self.claimed += c.claimed;
        self.stale += c.stale;
        self.held += c.held;
        self.succeeded += c.succeeded;
        self.retried += c.retried;
        self.deferred += c.deferred;
        self.failed += c.failed;
        self.lease_lost += c.lease_lost;
        self.dead_lettered += c.dead_lettered;
        self.panicked += c.panicked;
        self.returned += c.returned;
        self.lease_rounds += c.lease_rounds;
        self.reaper_runs += c.reaper_runs;
        self.wakeups += c.wakeups;
        self.statistics_checks += c.statistics_checks;
        self.statistics_refreshes += c.statistics_refreshes;
        self.parked += c.parked;
        self.reattached += c.reattached;
        self.pruned += c.pruned;
        self.expanded += c.expanded;
        self.quick += c.quick;
        self.quick_locks += c.quick_locks;
        self.waits_started += c.waits_started;
        self.waits_decided += c.waits_decided;
        self.waits_applied += c.waits_applied;
        self.slots_fired += c.slots_fired;
        self.slots_skipped += c.slots_skipped;
        self.slots_missed += c.slots_missed;
        self.slots_failed += c.slots_failed;
        self.waits_timed_out += c.waits_timed_out;
        self.waits_ended += c.waits_ended;
        self.runs_timed_out += c.runs_timed_out;
        self.children_started += c.children_started;
        self.children_cancelled += c.children_cancelled;
    }
}

/// The executor's figures of one invocation, per operation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OperationMetrics {
    operations: BTreeMap<String, OperationFigures>,
}

/// The figures of one operation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OperationFigures {
    /// Attempts by outcome metric name (`Succeeded`, `Failed`, `Retried`, `LeaseLost`, …).
    pub outcomes: BTreeMap<&'static str, u64>,
    /// Attempt durations (ms): from the attempt's start to its outcome.
    pub attempt_ms: Vec<f64>,
    /// Queue ages (ms): from a message's first send to its claim.
    pub queue_age_ms: Vec<f64>,
}

/// The dimension of an operation whose name is not a valid one
/// ([`rara_domain::workflow::valid_operation`]): a step stored before names were bounded at
/// submit, or a name from elsewhere, is counted under it and never becomes a dimension itself.
pub const INVALID_OPERATION: &str = "invalid";

/// The operation's name as a metric dimension: itself if valid, else [`INVALID_OPERATION`].
pub fn dimension(operation: &str) -> &str {
    if valid_operation(operation) { operation } else { INVALID_OPERATION }
}

impl OperationMetrics {
    /// An attempt of `operation` ended with `outcome` (a metric name) after `duration`.
    pub fn attempt(&mut self, operation: &str, outcome: &'static str, duration: Duration) {
        let figures = self.operations.entry(dimension(operation).to_owned()).or_default();
        *figures.outcomes.entry(outcome).or_default() += 1;
        figures.attempt_ms.push(duration.as_secs_f64() * 1000.0);
    }

    /// A message of `operation` was claimed `age` after it was first sent.
    pub fn queue_age(&mut self, operation: &str, age: Duration) {
        self.operations
            .entry(dimension(operation).to_owned())
            .or_default()
            .queue_age_ms
            .push(age.as_secs_f64() * 1000.0);
    }

    /// Each operation's figures, by operation name.
    pub fn operations(&self) -> impl Iterator<Item = (&str, &OperationFigures)> {
        self.operations.iter().map(|(name, figures)| (name.as_str(), figures))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Every field of `Counters` (from its serialized form, so a new field is seen here
    /// without touching this test), each set to a distinct value.
    fn distinct() -> (Vec<String>, Counters) {
        let fields: Vec<String> =
            serde_json::to_value(Counters::default()).unwrap().as_object().unwrap().keys().cloned().collect();
        let values: serde_json::Map<String, serde_json::Value> =
            fields.iter().enumerate().map(|(i, f)| (f.clone(), (i as u64 + 1).into())).collect();
        (fields, serde_json::from_value(values.into()).unwrap())
    }

    #[test]
    fn adding_counters_sums_every_field() {
        let (fields, counters) = distinct();
        let mut sum = counters;
        sum += counters;
        let sum = serde_json::to_value(sum).unwrap();
        for (i, field) in fields.iter().enumerate() {
            assert_eq!(sum[field], 2 * (i as u64 + 1), "{field} is not summed");
        }
    }

    #[test]
    fn an_operation_name_that_is_not_valid_is_never_a_dimension() {
        let mut metrics = OperationMetrics::default();
        let long = "o".repeat(300);
        for bad in ["text split", "a\nb", "", long.as_str(), "tëxt"] {
            metrics.attempt(bad, "Failed", Duration::from_millis(5));
            metrics.queue_age(bad, Duration::from_millis(1));
        }
        metrics.attempt("text.split", "Succeeded", Duration::from_millis(5));
        let names: Vec<&str> = metrics.operations().map(|(name, _)| name).collect();
        assert_eq!(names, vec![INVALID_OPERATION, "text.split"]);
        let invalid = metrics.operations().next().unwrap().1;
        assert_eq!((invalid.outcomes["Failed"], invalid.queue_age_ms.len()), (5, 5));
    }
}
