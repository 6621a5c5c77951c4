//! A message's fate is a value (DESIGN.md "A message's fate is a value").
//!
//! A [`BatchReport`] lists the records that were explicitly *acknowledged*, each with its
//! reason; every other record of the batch comes back (Lambda's batch item failures, or
//! the local runner leaving it on the queue). A bug, a panic or a `JoinError` is therefore
//! a retry, never a loss.
//!
//! [`judge`] is the pure half of recording an outcome: from how an execution ended to its
//! [`Verdict`], what must be written (succeed, fail, retry by message, retry by Postgres,
//! nothing).

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use rand::Rng;
use rara_domain::StepError;
use rara_domain::config::MAX_VISIBILITY_DELAY;
use rara_domain::executor::Resume;
use rara_domain::retry::{RetryDecision, RetryPolicy};
use rara_store::children::ChildStart;
use rara_store::claim::StaleReason;
use rara_store::map::Expansion;

use crate::executor::execution::Execution;
use crate::metrics::Counters;

/// One delivered message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub message_id: String,
    pub receipt_handle: String,
    pub body: String,
    pub traceparent: Option<String>,
    /// The message's `rara_operations` attribute as it came ([`rara_queue::operations`]): a
    /// hint of the operations its steps run; `None` when it had none.
    pub operations: Option<String>,
    /// When the message was first sent, for its first delivery only (the queue age at claim);
    /// `None` when unknown or redelivered.
    pub sent_at: Option<SystemTime>,
}

impl From<rara_queue::Received> for Record {
    /// A message a receive returned (the local runner's): its send time unknown.
    fn from(m: rara_queue::Received) -> Self {
        Record {
            message_id: m.message_id,
            receipt_handle: m.receipt_handle,
            body: m.body,
            traceparent: m.traceparent,
            operations: m.operations,
            sent_at: None,
        }
    }
}

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
    /// A child workflow step's child run was made and the step waits for it (the scheduler
    /// ends the wait when the child ends).
    Waiting,
    /// A step of a message of several that must come back was sent in a message of its own,
    /// hidden until then (the other steps' message is deleted when they settle).
    Moved,
}

/// One acknowledged record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acknowledged {
    pub message_id: String,
    pub why: Ack,
}

/// What a batch did. Records not in [`acknowledged`](Self::acknowledged) come back.
///
/// A message that names several steps (format 2) is acknowledged when each of its steps is:
/// [`acknowledged`](Self::acknowledged) lists the steps' fates, each under its message's id.
/// A step that must come back is moved into a message of its own ([`Ack::Moved`]) or, past
/// SQS's longest delay or when that send fails, brings the whole message back, and on its
/// return the steps that settled are stale to the claim.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchReport {
    received: Vec<String>,
    /// The steps of each message that names more than one.
    packed: HashMap<String, usize>,
    /// When each message that names several steps should come back at the soonest, and its
    /// receipt handle: set when the batch ends, not by each of its steps.
    comebacks: HashMap<String, (String, tokio::time::Instant)>,
    /// Steps of messages of several that must come back, to move into messages of their own
    /// when the batch ends: each step's record (its own body and `traceparent`) and when.
    moves: Vec<(Record, tokio::time::Instant)>,
    pub acknowledged: Vec<Acknowledged>,
    pub counters: Counters,
    /// Outcomes, attempt durations and queue ages per operation (printed as EMF lines by `rara_platform::metrics`).
    pub operations: crate::metrics::OperationMetrics,
}

impl BatchReport {
    /// A report for a batch of these message ids, none acknowledged yet.
    pub fn new(message_ids: Vec<String>) -> Self {
        let counters = Counters { received: message_ids.len() as u64, ..Default::default() };
        BatchReport {
            received: message_ids,
            packed: HashMap::new(),
            comebacks: HashMap::new(),
            moves: Vec::new(),
            acknowledged: Vec::new(),
            counters,
            operations: Default::default(),
        }
    }

    /// Notes that message `message_id` names `steps` steps, each to be acknowledged.
    pub(crate) fn packs(&mut self, message_id: &str, steps: usize) {
        if steps > 1 {
            self.packed.insert(message_id.to_owned(), steps);
            self.counters.packed += steps as u64 - 1;
        }
    }

    /// Whether `message_id` names several steps (its visibility is set once, when the batch
    /// ends: [`come_back_at`](Self::come_back_at)).
    pub(crate) fn is_packed(&self, message_id: &str) -> bool {
        self.packed.contains_key(message_id)
    }

    /// One step of a message of several must come back at `at`: the message comes back at the
    /// soonest of its steps' instants.
    pub(crate) fn come_back_at(&mut self, message_id: &str, receipt_handle: &str, at: tokio::time::Instant) {
        let soonest = self.comebacks.entry(message_id.to_owned()).or_insert((receipt_handle.to_owned(), at));
        soonest.1 = soonest.1.min(at);
    }

    /// One step of a message of several must come back at `at`, within
    /// [`MAX_SEND_DELAY`](rara_queue::MAX_SEND_DELAY): it is to be moved into a message of its
    /// own ([`take_moves`](Self::take_moves)).
    pub(crate) fn move_at(&mut self, record: &Record, at: tokio::time::Instant) {
        self.moves.push((record.clone(), at));
    }

    /// The steps to move, once.
    pub(crate) fn take_moves(&mut self) -> Vec<(Record, tokio::time::Instant)> {
        std::mem::take(&mut self.moves)
    }

    /// The messages of several steps that come back, with their receipt handles and when.
    pub(crate) fn comebacks(&self) -> Vec<(String, tokio::time::Instant)> {
        self.comebacks
            .iter()
            .filter(|(id, _)| !self.is_acknowledged(id))
            .map(|(_, (receipt, at))| (receipt.clone(), *at))
            .collect()
    }

    /// Marks a record as settled: its message may be deleted.
    pub fn acknowledge(&mut self, message_id: String, why: Ack) {
        self.acknowledged.push(Acknowledged { message_id, why });
    }

    /// Whether the message is settled: its step acknowledged, or each of its steps.
    pub fn is_acknowledged(&self, message_id: &str) -> bool {
        let steps = self.packed.get(message_id).copied().unwrap_or(1);
        self.acknowledged.iter().filter(|a| a.message_id == message_id).count() >= steps
    }

    /// Every message that was not acknowledged (one of whose steps was not), in the batch's
    /// order: these come back.
    pub fn returned(&self) -> Vec<String> {
        let mut acked: HashMap<&str, usize> = HashMap::new();
        for a in &self.acknowledged {
            *acked.entry(a.message_id.as_str()).or_default() += 1;
        }
        self.received
            .iter()
            .filter(|id| acked.get(id.as_str()).copied().unwrap_or(0) < self.packed.get(*id).copied().unwrap_or(1))
            .cloned()
            .collect()
    }

    /// Fills the `returned` and `unsettled` counters from the fates (call once, when the
    /// batch is done).
    pub(crate) fn close(&mut self) {
        self.counters.returned = self.returned().len() as u64;
        let steps = self.counters.received + self.counters.packed;
        self.counters.unsettled = steps.saturating_sub(self.acknowledged.len() as u64);
    }
}

/// The verdict on a finished execution: what recording it must write.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
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
    /// A child workflow step's claim: make the child run and let the step wait for it.
    StartChild(Box<ChildStart>),
}

/// Decides what to record for an execution of attempt `attempt` under `policy`. Pure: the
/// randomness of the backoff's jitter comes from `rng`.
pub fn judge(execution: Execution, attempt: u32, policy: &RetryPolicy, rng: &mut impl Rng) -> Verdict {
    match execution {
        Execution::Succeeded(output) => Verdict::Succeed(output),
        Execution::LeaseLost => Verdict::Nothing,
        Execution::Interrupted => Verdict::Release,
        Execution::Parked(resume) => Verdict::Park(resume),
        Execution::Expanded(expansion) => Verdict::Expand(expansion),
        Execution::Child(start) => Verdict::StartChild(start),
        Execution::Failed(error) => match policy.decide(attempt, &error, rng) {
            RetryDecision::RetryAfter(delay) if delay <= MAX_VISIBILITY_DELAY => {
                Verdict::RetryByMessage { error, delay }
            }
            RetryDecision::RetryAfter(delay) => Verdict::RetryByPostgres { error, delay },
            RetryDecision::Fail => Verdict::Fail(error),
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

    fn judged(execution: Execution, attempt: u32, policy: &RetryPolicy) -> Verdict {
        judge(execution, attempt, policy, &mut StdRng::seed_from_u64(1))
    }

    #[test]
    fn a_retry_within_12_hours_rides_on_the_message_and_a_longer_one_on_postgres() {
        let error = StepError::retryable("FLAKY", "try again");
        let short = policy(3, Duration::from_secs(60));
        assert!(matches!(judged(Execution::Failed(error.clone()), 1, &short),
            Verdict::RetryByMessage { delay, .. } if delay <= Duration::from_secs(60)));

        // Ceiling 13 h: find seeds on both sides of the 12 h line, and check the split.
        let long = policy(3, Duration::from_secs(13 * 3600));
        let (mut by_message, mut by_postgres) = (0, 0);
        for seed in 0..200 {
            match judge(Execution::Failed(error.clone()), 1, &long, &mut StdRng::seed_from_u64(seed)) {
                Verdict::RetryByMessage { delay, .. } => {
                    assert!(delay <= MAX_VISIBILITY_DELAY);
                    by_message += 1;
                }
                Verdict::RetryByPostgres { delay, .. } => {
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
        assert_eq!(judged(Execution::Failed(permanent.clone()), 1, &p), Verdict::Fail(permanent));
        let listed = StepError::retryable("NEVER_AGAIN", "retryable flag, but listed");
        assert_eq!(judged(Execution::Failed(listed.clone()), 1, &p), Verdict::Fail(listed));
        let last = StepError::retryable(codes::EXECUTOR_PANICKED, "the executor panicked");
        assert_eq!(judged(Execution::Failed(last.clone()), 3, &p), Verdict::Fail(last));
    }

    #[test]
    fn success_is_recorded_and_a_lost_lease_records_nothing() {
        let p = policy(3, Duration::from_secs(10));
        let output = serde_json::json!({"ok": true});
        assert_eq!(judged(Execution::Succeeded(output.clone()), 1, &p), Verdict::Succeed(output));
        assert_eq!(judged(Execution::LeaseLost, 1, &p), Verdict::Nothing);
        assert_eq!(judged(Execution::Interrupted, 3, &p), Verdict::Release, "even on the last attempt");
        let resume = Resume { endpoint: "http://127.0.0.1:1".into(), sequence: 7 };
        assert_eq!(judged(Execution::Parked(resume.clone()), 3, &p), Verdict::Park(resume), "parked, not failed");
    }

    #[test]
    fn records_that_were_not_acknowledged_come_back_in_order() {
        let mut report = BatchReport::new(vec!["a".into(), "b".into(), "c".into(), "d".into()]);
        report.acknowledge("c".into(), Ack::Succeeded);
        report.acknowledge("a".into(), Ack::DeadLettered { code: "MALFORMED_MESSAGE".into() });
        report.close();
        assert_eq!(report.returned(), vec!["b".to_owned(), "d".to_owned()]);
        assert_eq!((report.counters.received, report.counters.returned, report.counters.unsettled), (4, 2, 2));
        assert!(report.is_acknowledged("c") && !report.is_acknowledged("d"));
    }

    #[test]
    fn a_message_of_several_steps_is_acknowledged_when_each_of_them_is() {
        let mut report = BatchReport::new(vec!["one".into(), "three".into(), "two".into()]);
        report.packs("one", 1);
        report.packs("three", 3);
        report.packs("two", 2);
        assert!(report.is_packed("three") && !report.is_packed("one"));
        report.acknowledge("one".into(), Ack::Succeeded);
        report.acknowledge("three".into(), Ack::Succeeded);
        report.acknowledge("three".into(), Ack::Stale(StaleReason::DuplicateInBatch));
        report.acknowledge("two".into(), Ack::Succeeded);
        report.acknowledge("two".into(), Ack::LeaseLost);
        let now = tokio::time::Instant::now();
        report.come_back_at("three", "r3", now + Duration::from_secs(9));
        report.come_back_at("three", "r3", now + Duration::from_secs(2));
        report.come_back_at("two", "r2", now);
        report.close();
        assert_eq!(report.returned(), vec!["three".to_owned()], "one step of three is not settled");
        assert!(!report.is_acknowledged("three") && report.is_acknowledged("two"));
        assert_eq!(report.comebacks(), vec![("r3".to_owned(), now + Duration::from_secs(2))], "the soonest, once");
        let c = report.counters;
        assert_eq!((c.received, c.packed, c.returned, c.unsettled), (3, 3, 1, 1), "six steps, one not settled");
    }
}
