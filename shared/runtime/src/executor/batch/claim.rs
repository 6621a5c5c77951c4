//! The claim of a batch: one statement for every valid record, the references of the claimed
//! inputs substituted, each claimed step spawned in its span; stale, held and unknown steps
//! settled at once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use opentelemetry::context::FutureExt as _;
use rara_queue::StepMessage;
use rara_store::claim::{ClaimOutcome, ClaimedStep};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::Instrument;

use super::trace::AttemptTrace;
use super::{BatchExecutor, InFlight, child, references, requests, step_span};
use crate::executor::execution::{self, Execution};
use crate::executor::fate::{Ack, BatchReport, Record};
use rara_domain::workflow::child::CHILD_OPERATION;

impl BatchExecutor {
    /// Claims the batch in one statement and starts every claimed step in `running`.
    pub(super) async fn claim(
        &self,
        valid: Vec<(Record, StepMessage)>,
        deadline: Instant,
        running: &mut JoinSet<Execution>,
        in_flight: &mut HashMap<tokio::task::Id, InFlight>,
        report: &mut BatchReport,
    ) {
        let claim_started = SystemTime::now();
        let claimed = self.db(self.env.store.claim(&self.worker, &requests(&valid), self.env.lease)).await;
        let claim_ended = SystemTime::now();
        let mut outcomes = match claimed {
            Ok(outcomes) => outcomes,
            Err(e) => {
                tracing::error!(error = %e, "claim failed; every message of the batch comes back");
                return;
            }
        };
        // Data flow: references substituted for the batch; a step that must not run ends here.
        let mut ended = self.substitute_references(&mut outcomes).await;
        for ((record, message), outcome) in valid.into_iter().zip(outcomes) {
            match outcome {
                ClaimOutcome::Claimed(step) => {
                    report.counters.claimed += 1;
                    if step.resume.is_some() {
                        report.counters.reattached += 1;
                    }
                    let step: Arc<ClaimedStep> = Arc::from(step);
                    if let Some(age) = record.sent_at.and_then(|sent| claim_started.duration_since(sent).ok()) {
                        report.operations.queue_age(&step.operation, age);
                    }
                    let trace = AttemptTrace::new(record.traceparent.as_deref(), &step, step.started_at.into());
                    if let Some(trace) = &trace {
                        trace.claim(claim_started, claim_ended);
                    }
                    let id = match ended.remove(&step.holder.step_id) {
                        Some(execution) => references::spawn_ended(running, &step, execution),
                        None if step.operation == CHILD_OPERATION => {
                            let task = child::task(
                                self.env.store.clone(),
                                self.core.clone(),
                                self.env.registry.clone(),
                                step.clone(),
                            );
                            running.spawn(task.instrument(super::step_span(&step))).id()
                        }
                        None => self.spawn(running, &record, step.clone(), trace.as_ref(), deadline),
                    };
                    in_flight.insert(id, InFlight { record, step, trace });
                }
                ClaimOutcome::Stale(reason) => {
                    report.counters.stale += 1;
                    tracing::info!(message_id = %record.message_id, step_id = %message.step_id, ?reason, "stale message acknowledged; nothing runs");
                    report.acknowledge(record.message_id, Ack::Stale(reason));
                }
                ClaimOutcome::Held { retry_after } => {
                    report.counters.held += 1;
                    let wait = retry_after.max(Duration::from_secs(1));
                    tracing::info!(step_id = %message.step_id, wait_ms = wait.as_millis() as u64, "step is held; the message comes back when the hold ends");
                    self.come_back(&record, wait, report).await;
                }
                ClaimOutcome::UnknownStep => {
                    let reason = format!("step {} does not exist", message.step_id);
                    self.dead_letter(record, "UNKNOWN_STEP", &reason, report).await;
                }
            }
        }
    }

    pub(super) fn spawn(
        &self,
        running: &mut JoinSet<Execution>,
        record: &Record,
        step: Arc<ClaimedStep>,
        trace: Option<&AttemptTrace>,
        deadline: Instant,
    ) -> tokio::task::Id {
        let env = self.env.clone();
        let receipt_handle = record.receipt_handle.clone();
        let span = step_span(&step);
        if let Some(trace) = trace {
            trace.adopt(&span);
        }
        let task = async move {
            tracing::info!(took_over = step.took_over, reattach = step.resume.is_some(), "claimed");
            execution::execute(&env, &step, &receipt_handle, deadline).await
        };
        // The attempt's context goes with the task, exported or not (W3C Trace Context: a
        // participant propagates what it does not record).
        let context = trace.map_or_else(opentelemetry::Context::new, AttemptTrace::context);
        running.spawn(task.instrument(span).with_context(context)).id()
    }
}
