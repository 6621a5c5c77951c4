//! A message's fate is a value (DESIGN.md "A message's fate is a value").
//!
//! A [`BatchReport`] lists the records that were explicitly *acknowledged*, each with its
//! reason; every other record of the batch comes back (Lambda's batch item failures, or
//! the local runner leaving it on the queue). A bug, a panic or a `JoinError` is therefore
//! a retry, never a loss.
//!
//! [`plan`] is the pure half of recording an outcome: from how an execution ended to what
//! must be written (succeed, fail, retry by message, retry by Postgres, nothing).

use std::collections::HashSet;
use std::time::Duration;

use rand::Rng;
use rara_domain::StepError;
use rara_domain::config::MAX_VISIBILITY_DELAY;
use rara_domain::executor::Resume;
use rara_domain::retry::{RetryDecision, RetryPolicy};
use rara_store::claim::StaleReason;
use rara_store::map::Expansion;

use crate::execution::Execution;
use crate::metrics::Counters;

/// Why a record was acknowledged (its message is deleted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ack {
    /// The step succeeded and the success was recorded.
    Succeeded,
    /// The step failed for good and the failure was recorded.
    Failed,
    /// A retry beyond the visibility limit was recorded in Postgres (`pending` with
    /// `next_run_at`); the scheduler sends a new message when it is due.
    RetryInPostgres,
    /// The message no longer names the step's current lease: nothing ran.
    Stale(StaleReason),
    /// The lease was lost while the step ran (cancelled, reaped, taken over): someone else
    /// owns the step now and nothing was written.
    LeaseLost,
    /// The runner stopped before the step finished and gave it back (its token cleared, so
    /// this message is stale): the step is due again for another executor.
    Released,
    /// The message could not be processed and is on the DLQ with this reason code.
    DeadLettered { code: String },
    /// A map step was expanded into its children; its next claim gathers their outputs.
    Expanded,
}

/// One acknowledged record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acknowledged {
    pub message_id: String,
    pub why: Ack,
}

/// What a batch did. Records not in [`acknowledged`](Self::acknowledged) come back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchReport {
    received: Vec<String>,
    pub acknowledged: Vec<Acknowledged>,
    pub counters: Counters,
    /// Outcomes, attempt durations and queue ages per operation (EMF, `metrics.rs`).
    pub operations: crate::metrics::OperationMetrics,
}

impl BatchReport {
    /// A report for a batch of these message ids, none acknowledged yet.
    pub fn new(message_ids: Vec<String>) -> Self {
        let counters = Counters { received: message_ids.len() as u64, ..Default::default() };
        BatchReport { received: message_ids, acknowledged: Vec::new(), counters, operations: Default::default() }
    }

    /// Marks a record as settled: its message may be deleted.
    pub fn acknowledge(&mut self, message_id: String, why: Ack) {
        self.acknowledged.push(Acknowledged { message_id, why });
    }

    pub fn is_acknowledged(&self, message_id: &str) -> bool {
        self.acknowledged.iter().any(|a| a.message_id == message_id)
    }

    /// Every record that was not acknowledged, in the batch's order: these come back.
    pub fn returned(&self) -> Vec<String> {
        let acked: HashSet<&str> = self.acknowledged.iter().map(|a| a.message_id.as_str()).collect();
        self.received.iter().filter(|id| !acked.contains(id.as_str())).cloned().collect()
    }

    /// Fills the `returned` counter from the fates (call once, when the batch is done).
    pub(crate) fn close(&mut self) {
        self.counters.returned = self.returned().len() as u64;
    }
}

/// What recording a finished execution must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    Succeed(serde_json::Value),
    /// Fail for good: permanent, non-retryable code, or no attempts left.
    Fail(StepError),
    /// Retry within the visibility limit: the same message comes back after `delay`.
    RetryByMessage {
        error: StepError,
        delay: Duration,
    },
    /// Retry beyond the visibility limit: back to `pending` in Postgres, message deleted.
    RetryByPostgres {
        error: StepError,
        delay: Duration,
    },
    /// The lease was lost: write nothing.
    Nothing,
    /// The runner is stopping: give the step back, the attempt not counted.
    Release,
    /// A detachable remote attempt goes on without this invocation: park the step (same
    /// attempt, same fence); its message comes back to re-attach.
    Park(Resume),
    /// A map step's first claim: create its children and let it wait on them.
    Expand(Expansion),
}

/// Decides what to record for an execution of attempt `attempt` under `policy`. Pure: the
/// randomness of the backoff's jitter comes from `rng`.
pub fn plan(execution: Execution, attempt: u32, policy: &RetryPolicy, rng: &mut impl Rng) -> Plan {
    match execution {
        Execution::Succeeded(output) => Plan::Succeed(output),
        Execution::LeaseLost => Plan::Nothing,
        Execution::Interrupted => Plan::Release,
        Execution::Parked(resume) => Plan::Park(resume),
        Execution::Expanded(expansion) => Plan::Expand(expansion),
        Execution::Failed(error) => match policy.decide(attempt, &error, rng) {
            RetryDecision::RetryAfter(delay) if delay <= MAX_VISIBILITY_DELAY => Plan::RetryByMessage { error, delay },
            RetryDecision::RetryAfter(delay) => Plan::RetryByPostgres { error, delay },
            RetryDecision::Fail => Plan::Fail(error),
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;
    use rara_domain::step_error::codes;

    fn policy(max_attempts: u32, max_delay: Duration) -> RetryPolicy {
        RetryPolicy {
            max_attempts,
            // initial = max: full jitter draws from [0, max], so a seed picks a long delay.
            initial_delay: max_delay,
            max_delay,
            multiplier: 1.0,
            non_retryable_codes: vec!["NEVER_AGAIN".into()],
        }
    }

    fn planned(execution: Execution, attempt: u32, policy: &RetryPolicy) -> Plan {
        plan(execution, attempt, policy, &mut StdRng::seed_from_u64(1))
    }

    #[test]
    fn a_retry_within_12_hours_rides_on_the_message_and_a_longer_one_on_postgres() {
        let error = StepError::retryable("FLAKY", "try again");
        let short = policy(3, Duration::from_secs(60));
        assert!(matches!(planned(Execution::Failed(error.clone()), 1, &short),
            Plan::RetryByMessage { delay, .. } if delay <= Duration::from_secs(60)));

        // Ceiling 13 h: find seeds on both sides of the 12 h line, and check the split.
        let long = policy(3, Duration::from_secs(13 * 3600));
        let (mut by_message, mut by_postgres) = (0, 0);
        for seed in 0..200 {
            match plan(Execution::Failed(error.clone()), 1, &long, &mut StdRng::seed_from_u64(seed)) {
                Plan::RetryByMessage { delay, .. } => {
                    assert!(delay <= MAX_VISIBILITY_DELAY);
                    by_message += 1;
                }
                Plan::RetryByPostgres { delay, .. } => {
                    assert!(delay > MAX_VISIBILITY_DELAY);
                    by_postgres += 1;
                }
                other => panic!("a retryable failure with attempts left must retry, got {other:?}"),
            }
        }
        assert!(by_message > 0 && by_postgres > 0, "both routes seen: {by_message} / {by_postgres}");
    }

    #[test]
    fn permanent_errors_listed_codes_and_the_last_attempt_fail_for_good() {
        let p = policy(3, Duration::from_secs(10));
        let permanent = StepError::permanent("BAD_INPUT", "no");
        assert_eq!(planned(Execution::Failed(permanent.clone()), 1, &p), Plan::Fail(permanent));
        let listed = StepError::retryable("NEVER_AGAIN", "retryable flag, but listed");
        assert_eq!(planned(Execution::Failed(listed.clone()), 1, &p), Plan::Fail(listed));
        let last = StepError::retryable(codes::EXECUTOR_PANICKED, "the executor panicked");
        assert_eq!(planned(Execution::Failed(last.clone()), 3, &p), Plan::Fail(last));
    }

    #[test]
    fn success_is_recorded_and_a_lost_lease_records_nothing() {
        let p = policy(3, Duration::from_secs(10));
        let output = serde_json::json!({"ok": true});
        assert_eq!(planned(Execution::Succeeded(output.clone()), 1, &p), Plan::Succeed(output));
        assert_eq!(planned(Execution::LeaseLost, 1, &p), Plan::Nothing);
        assert_eq!(planned(Execution::Interrupted, 3, &p), Plan::Release, "even on the last attempt");
        let resume = Resume { endpoint: "http://127.0.0.1:1".into(), sequence: 7 };
        assert_eq!(planned(Execution::Parked(resume.clone()), 3, &p), Plan::Park(resume), "parked, not failed");
    }

    #[test]
    fn records_that_were_not_acknowledged_come_back_in_order() {
        let mut report = BatchReport::new(vec!["a".into(), "b".into(), "c".into(), "d".into()]);
        report.acknowledge("c".into(), Ack::Succeeded);
        report.acknowledge("a".into(), Ack::DeadLettered { code: "MALFORMED_MESSAGE".into() });
        report.close();
        assert_eq!(report.returned(), vec!["b".to_owned(), "d".to_owned()]);
        assert_eq!((report.counters.received, report.counters.returned), (4, 2));
        assert!(report.is_acknowledged("c") && !report.is_acknowledged("d"));
    }
}
