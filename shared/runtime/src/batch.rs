//! The executor's batch (one SQS event, or one local receive): parse every message, claim
//! the valid ones in one statement, run the claimed steps concurrently, record their
//! outcomes in micro-batches as they finish, and answer which messages must come back.
//!
//! A message's fate:
//! - malformed, unknown version, too large, unknown step: put on the DLQ with its reason,
//!   then acknowledged (if the DLQ send fails, it comes back and redrive takes it there);
//! - stale (token no longer current, step finished, duplicate): acknowledged, nothing runs;
//! - held by another live holder, or its retry not due yet: comes back when the hold ends;
//! - ran: succeeded / failed for good / retry beyond 12 h → acknowledged; retry within
//!   12 h → comes back after the retry delay (visibility = delay, `next_run_at` = same);
//! - an outcome that could not be recorded (database trouble): comes back.

use std::sync::Arc;
use std::time::Duration;

use rara_domain::StepError;
use rara_domain::config::MAX_VISIBILITY_DELAY;
use rara_domain::retry::{RetryDecision, RetryPolicy};
use rara_queue::{Queue, StepMessage};
use rara_store::claim::{ClaimOutcome, ClaimRequest, ClaimedStep};
use rara_store::outcome::RetryVia;
use rara_store::{Holder, Store};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::Instrument;

use crate::execution::{self, Environment, Execution};
use crate::metrics::Counters;
use crate::secrets::{EnvSecretResolver, SecretResolver};
use crate::settings::Settings;

/// One delivered message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub message_id: String,
    pub receipt_handle: String,
    pub body: String,
    pub traceparent: Option<String>,
}

/// What the batch did, and the messages that must come back (Lambda's batch item failures).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchReport {
    pub returned: Vec<String>,
    pub counters: Counters,
}

/// The executor's batch processor. Built once per container; cheap to clone.
#[derive(Clone)]
pub struct BatchExecutor {
    env: Environment,
    worker: Arc<str>,
    non_retryable_codes: Arc<[String]>,
}

impl std::fmt::Debug for BatchExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchExecutor").field("worker", &self.worker).finish_non_exhaustive()
    }
}

struct Finished {
    record: Record,
    step: ClaimedStep,
    execution: Execution,
}

impl BatchExecutor {
    pub fn new(
        store: Store,
        queue: Arc<dyn Queue>,
        registry: Arc<rara_domain::registry::Registry>,
        settings: &Settings,
    ) -> Self {
        let core = &settings.core;
        BatchExecutor {
            env: Environment {
                store,
                queue,
                registry,
                lease: core.lease_duration,
                heartbeat_interval: core.heartbeat_interval,
                progress_interval: settings.progress_interval,
                secrets: Arc::new(EnvSecretResolver::from_env()),
            },
            worker: core.worker_id.as_str().into(),
            non_retryable_codes: core.default_retry.non_retryable_codes.clone().into(),
        }
    }

    /// Where the input's `{"$secret": "name"}` references are resolved (by default
    /// [`EnvSecretResolver::from_env`]).
    pub fn with_secrets(mut self, secrets: Arc<dyn SecretResolver>) -> Self {
        self.env.secrets = secrets;
        self
    }

    pub fn worker(&self) -> &str {
        &self.worker
    }

    /// Processes one batch. Every execution ends by `deadline` (the invocation's end minus
    /// a margin). Never panics; every message gets a fate.
    pub async fn process(&self, records: Vec<Record>, deadline: Instant) -> BatchReport {
        let mut report = BatchReport {
            counters: Counters { received: records.len() as u64, ..Default::default() },
            ..Default::default()
        };
        let mut valid: Vec<(Record, StepMessage)> = Vec::with_capacity(records.len());
        for record in records {
            match StepMessage::parse(&record.body) {
                Ok(message) => valid.push((record, message)),
                Err(e) => self.dead_letter(record, e.code(), &e.to_string(), &mut report).await,
            }
        }
        if valid.is_empty() {
            return report;
        }

        let requests: Vec<ClaimRequest> =
            valid.iter().map(|(_, m)| ClaimRequest { step_id: m.step_id, lease_token: m.lease_token }).collect();
        let outcomes = match self.env.store.claim(&self.worker, &requests, self.env.lease).await {
            Ok(outcomes) => outcomes,
            Err(e) => {
                tracing::error!(error = %e, "claim failed; every message of the batch comes back");
                report.returned.extend(valid.into_iter().map(|(r, _)| r.message_id));
                report.counters.returned = report.returned.len() as u64;
                return report;
            }
        };

        let (tx, mut rx) = mpsc::unbounded_channel::<Finished>();
        let mut running = 0usize;
        for ((record, message), outcome) in valid.into_iter().zip(outcomes) {
            match outcome {
                ClaimOutcome::Claimed(step) => {
                    report.counters.claimed += 1;
                    running += 1;
                    self.spawn(record, *step, deadline, tx.clone());
                }
                ClaimOutcome::Stale(reason) => {
                    report.counters.stale += 1;
                    tracing::info!(step_id = %message.step_id, ?reason, "stale message acknowledged; nothing runs");
                }
                ClaimOutcome::Held { retry_after } => {
                    report.counters.held += 1;
                    let wait = retry_after.max(Duration::from_secs(1));
                    tracing::info!(step_id = %message.step_id, wait_ms = wait.as_millis() as u64, "step is held; the message comes back when the hold ends");
                    self.come_back(record, wait, &mut report).await;
                }
                ClaimOutcome::UnknownStep => {
                    let reason = format!("step {} does not exist", message.step_id);
                    self.dead_letter(record, "UNKNOWN_STEP", &reason, &mut report).await;
                }
            }
        }
        drop(tx);

        // Record outcomes as they finish, in micro-batches: whatever finished together is
        // recorded together (one statement per kind of outcome).
        while running > 0 {
            let Some(first) = rx.recv().await else { break };
            let mut finished = vec![first];
            while let Ok(more) = rx.try_recv() {
                finished.push(more);
            }
            running -= finished.len();
            self.record(finished, &mut report).await;
        }
        report.counters.returned = report.returned.len() as u64;
        report
    }

    fn spawn(&self, record: Record, step: ClaimedStep, deadline: Instant, tx: mpsc::UnboundedSender<Finished>) {
        let env = self.env.clone();
        let span = tracing::info_span!(
            "step",
            run_id = %step.run_id,
            step_id = %step.holder.step_id,
            attempt = step.attempt,
            fence = step.holder.fence,
            operation = %step.operation,
            trace_id = record.traceparent.as_deref().and_then(crate::trace_id).unwrap_or(""),
        );
        tokio::spawn(
            async move {
                tracing::info!(took_over = step.took_over, "claimed");
                let execution = execution::execute(&env, &step, &record.receipt_handle, deadline).await;
                // The receiver lives until every spawned step reported.
                let _ = tx.send(Finished { record, step, execution });
            }
            .instrument(span),
        );
    }

    async fn record(&self, finished: Vec<Finished>, report: &mut BatchReport) {
        let mut successes = Vec::new();
        let mut via_message = Vec::new();
        let mut via_postgres = Vec::new();
        let mut failures = Vec::new();
        {
            // The thread-local RNG is not Send: keep it out of the awaits below.
            let mut rng = rand::rng();
            for f in finished {
                match f.execution {
                    Execution::Succeeded(output) => successes.push((f.record, f.step.holder.clone(), output)),
                    Execution::LeaseLost => {
                        report.counters.lease_lost += 1;
                        tracing::info!(step_id = %f.step.holder.step_id, "lease lost; nothing recorded");
                    }
                    Execution::Failed(error) => match self.policy(&f.step).decide(f.step.attempt, &error, &mut rng) {
                        RetryDecision::RetryAfter(delay) if delay <= MAX_VISIBILITY_DELAY => {
                            via_message.push((f.record, f.step.holder.clone(), error, delay))
                        }
                        RetryDecision::RetryAfter(delay) => {
                            via_postgres.push((f.record, f.step.holder.clone(), error, delay))
                        }
                        RetryDecision::Fail => failures.push((f.record, f.step.holder.clone(), error)),
                    },
                }
            }
        }

        if !successes.is_empty() {
            let items: Vec<(Holder, serde_json::Value)> =
                successes.iter().map(|(_, h, o)| (h.clone(), o.clone())).collect();
            let results = self.env.store.succeed(&items).await;
            let records = successes.into_iter().map(|(r, _, _)| r).collect();
            self.settle(records, results, report, |c| c.succeeded += 1).await;
        }
        if !failures.is_empty() {
            for (_, holder, error) in &failures {
                tracing::warn!(step_id = %holder.step_id, code = %error.code, retryable = error.retryable, "step failed for good");
            }
            let items: Vec<(Holder, StepError)> = failures.iter().map(|(_, h, e)| (h.clone(), e.clone())).collect();
            let results = self.env.store.fail(&items).await;
            let records = failures.into_iter().map(|(r, _, _)| r).collect();
            self.settle(records, results, report, |c| c.failed += 1).await;
        }
        if !via_postgres.is_empty() {
            let items: Vec<(Holder, StepError, Duration)> =
                via_postgres.iter().map(|(_, h, e, d)| (h.clone(), e.clone(), *d)).collect();
            let results = self.env.store.retry(&items, RetryVia::Postgres).await;
            let records = via_postgres.into_iter().map(|(r, _, _, _)| r).collect();
            self.settle(records, results, report, |c| c.retried += 1).await;
        }
        if !via_message.is_empty() {
            let items: Vec<(Holder, StepError, Duration)> =
                via_message.iter().map(|(_, h, e, d)| (h.clone(), e.clone(), *d)).collect();
            let results = self.env.store.retry(&items, RetryVia::Message { lease: self.env.lease }).await;
            match results {
                Ok(results) => {
                    for ((record, holder, error, delay), result) in via_message.into_iter().zip(results) {
                        match result {
                            Ok(()) => {
                                report.counters.retried += 1;
                                tracing::info!(step_id = %holder.step_id, code = %error.code, delay_ms = delay.as_millis() as u64, "retry scheduled; the message comes back after the delay");
                                self.come_back(record, delay, report).await;
                            }
                            Err(e) => self.unrecorded(record, e, report),
                        }
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "recording retries failed; their messages come back");
                    report.returned.extend(via_message.into_iter().map(|(r, _, _, _)| r.message_id));
                }
            }
        }
    }

    /// Acknowledges the records whose outcome landed; the rest come back.
    async fn settle(
        &self,
        records: Vec<Record>,
        results: Result<Vec<Result<(), rara_store::Error>>, rara_store::Error>,
        report: &mut BatchReport,
        count: impl Fn(&mut Counters),
    ) {
        match results {
            Ok(results) => {
                for (record, result) in records.into_iter().zip(results) {
                    match result {
                        Ok(()) => count(&mut report.counters),
                        Err(e) => self.unrecorded(record, e, report),
                    }
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "recording outcomes failed; their messages come back");
                report.returned.extend(records.into_iter().map(|r| r.message_id));
            }
        }
    }

    /// An outcome that did not land: a lost lease is acknowledged (someone else owns the
    /// step now); anything else comes back and the claim decides again.
    fn unrecorded(&self, record: Record, error: rara_store::Error, report: &mut BatchReport) {
        if let rara_store::Error::LeaseLost { step_id, .. } = error {
            report.counters.lease_lost += 1;
            tracing::info!(%step_id, "lease lost before the outcome was recorded; nothing written");
        } else {
            tracing::error!(error = %error, "an outcome could not be recorded; the message comes back");
            report.returned.push(record.message_id);
        }
    }

    /// The message comes back after `wait` (visibility set now; if that fails it comes back
    /// after the queue's visibility timeout and the claim tells it to wait again).
    async fn come_back(&self, record: Record, wait: Duration, report: &mut BatchReport) {
        if let Err(e) = self.env.queue.change_visibility(&record.receipt_handle, wait).await {
            tracing::warn!(error = %e, "could not set the message's visibility; it returns after the queue's timeout");
        }
        report.returned.push(record.message_id);
    }

    async fn dead_letter(&self, record: Record, code: &str, reason: &str, report: &mut BatchReport) {
        match self.env.queue.dead_letter(&record.body, code, reason).await {
            Ok(()) => {
                report.counters.dead_lettered += 1;
                tracing::warn!(message_id = %record.message_id, code, reason, "message moved to the dead-letter queue");
            }
            Err(e) => {
                tracing::error!(error = %e, code, "could not move a bad message to the DLQ; it comes back (redrive takes it there)");
                report.returned.push(record.message_id);
            }
        }
    }

    fn policy(&self, step: &ClaimedStep) -> RetryPolicy {
        RetryPolicy {
            max_attempts: step.max_attempts,
            initial_delay: step.retry_initial_delay,
            max_delay: step.retry_max_delay,
            multiplier: step.retry_multiplier,
            non_retryable_codes: self.non_retryable_codes.to_vec(),
        }
    }
}
