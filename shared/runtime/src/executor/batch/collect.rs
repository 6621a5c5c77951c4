//! Collecting a batch's executions as they finish: whatever finishes together (each within
//! [`RECORD_WINDOW`] of the one before, up to [`RECORD_WINDOW_MAX`] after the first) is judged
//! and recorded together.
//!
//! Each step is judged on its own, behind [`std::panic::catch_unwind`]: a verdict that panics
//! (a retry decision on hostile details, say) is that step's retryable `EXECUTOR_PANICKED`,
//! never its siblings' fate.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::PoisonError;
use std::time::SystemTime;

use rand::rngs::StdRng;
use rara_domain::StepError;
use rara_domain::retry::RetryPolicy;
use rara_domain::step_error::codes;

use tokio::task::JoinSet;
use tokio::time::Instant;

use super::record::Finished;
use super::{BatchExecutor, InFlight, RECORD_WINDOW, RECORD_WINDOW_MAX, panicked, trace};
use crate::executor::execution::Execution;
use crate::executor::fate::{BatchReport, Verdict};

impl BatchExecutor {
    /// Records outcomes as the steps finish, in micro-batches: whatever finished together (each
    /// within [`RECORD_WINDOW`] of the one before, up to [`RECORD_WINDOW_MAX`] after the first) is
    /// recorded together (one statement per kind of outcome).
    pub(super) async fn collect(
        &self,
        mut running: JoinSet<Execution>,
        mut in_flight: HashMap<tokio::task::Id, InFlight>,
        report: &mut BatchReport,
    ) {
        while let Some(first) = running.join_next_with_id().await {
            let mut joined = vec![first];
            // What finishes within RECORD_WINDOW of the one before joins it, up to
            // RECORD_WINDOW_MAX after the first: a batch of short steps is one statement, not
            // one per wave of completions, even when its hundred steps finish over more than
            // one window (journal: docs/benchmarks/journal/2026-12-04-after-this-rounds-cuts.md,
            // 2026-12-06-ordinary-path-2.md).
            let last_call = Instant::now() + RECORD_WINDOW_MAX;
            loop {
                while let Some(more) = running.try_join_next_with_id() {
                    joined.push(more);
                }
                if running.is_empty() {
                    break;
                }
                let window = (Instant::now() + RECORD_WINDOW).min(last_call);
                match tokio::time::timeout_at(window, running.join_next_with_id()).await {
                    Ok(Some(more)) => joined.push(more),
                    _ => break,
                }
            }
            let mut finished = Vec::with_capacity(joined.len());
            let mut traces = Vec::new();
            {
                // The lock is not held across the awaits below.
                let mut rng = self.jitter.lock().unwrap_or_else(PoisonError::into_inner);
                for result in joined {
                    let (id, execution) = match result {
                        Ok((id, execution)) => (id, execution),
                        Err(join) => {
                            report.counters.panicked += 1;
                            (join.id(), panicked(&join))
                        }
                    };
                    // Every task was registered when spawned; a missing one cannot be
                    // recorded and its record (if any) comes back.
                    let Some(InFlight { record, step, trace }) = in_flight.remove(&id) else { continue };
                    let Some(verdict) = judged(execution, step.attempt, &self.policy(&step), &mut rng) else {
                        // Even its panic's verdict could not be judged: the record comes back.
                        continue;
                    };
                    let (label, metric) = trace::outcome(&verdict);
                    let ran = (chrono::Utc::now() - step.started_at).to_std().unwrap_or_default();
                    report.operations.attempt(&step.operation, metric, ran);
                    traces.extend(trace.map(|t| (t, label)));
                    finished.push(Finished {
                        record,
                        holder: step.holder.clone(),
                        attached_at: step.attached_at,
                        verdict,
                    });
                }
            }
            let started = SystemTime::now();
            self.record(finished, report).await;
            let ended = SystemTime::now();
            for (trace, outcome) in traces {
                trace.finish(outcome, started, ended);
            }
        }
    }
}

/// [`judge`](crate::executor::fate::judge) with a panic caught: a panicking verdict becomes the
/// step's retryable `EXECUTOR_PANICKED` failure, judged in turn; `None` when even that panics.
fn judged(execution: Execution, attempt: u32, policy: &RetryPolicy, rng: &mut StdRng) -> Option<Verdict> {
    guarded(execution, |execution| crate::executor::fate::judge(execution, attempt, policy, &mut *rng))
}

/// `judge(execution)` behind `catch_unwind` (see [`judged`]).
fn guarded(execution: Execution, mut judge: impl FnMut(Execution) -> Verdict) -> Option<Verdict> {
    let mut judge = |execution: Execution| std::panic::catch_unwind(AssertUnwindSafe(|| judge(execution)));
    match judge(execution) {
        Ok(verdict) => Some(verdict),
        Err(_) => {
            // The payload is not kept: it may hold anything the step returned.
            tracing::error!("judging a step's execution panicked; recorded as EXECUTOR_PANICKED");
            let error = StepError::retryable(codes::EXECUTOR_PANICKED, "deciding the step's outcome panicked");
            judge(Execution::Failed(error)).ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_verdict_that_panics_becomes_the_steps_retryable_executor_panicked() {
        let hostile = Execution::Failed(StepError::retryable("HOSTILE", "details that make judging panic"));
        let verdict = guarded(hostile, |execution| match execution {
            Execution::Failed(error) if error.code == "HOSTILE" => panic!("judging panicked"),
            Execution::Failed(error) => Verdict::RetryByMessage { error, delay: Duration::from_secs(1) },
            _ => Verdict::Nothing,
        });
        let Some(Verdict::RetryByMessage { error, .. }) = verdict else { panic!("{verdict:?}") };
        assert_eq!((error.code.as_str(), error.retryable), (codes::EXECUTOR_PANICKED, true));
    }

    #[test]
    fn a_verdict_that_panics_twice_leaves_the_record_to_come_back() {
        let verdict = guarded(Execution::LeaseLost, |_| panic!("always"));
        assert_eq!(verdict, None);
    }
}
