//! The executor's batch (one SQS event, or one local receive): parse every message, claim
//! the valid ones in one statement, run the claimed steps concurrently, record their
//! outcomes in micro-batches as they finish, and say which messages were settled.
//!
//! A message's fate ([`crate::fate`]): only what is explicitly acknowledged is deleted;
//! everything else comes back.
//! - malformed, unknown version, too large, unknown step: put on the DLQ with its reason,
//!   then acknowledged (if the DLQ send fails, it comes back and redrive takes it there);
//! - stale (token no longer current, step finished, duplicate): acknowledged, nothing runs;
//! - held by another live holder, or its retry not due yet: comes back when the hold ends;
//! - a detachable remote attempt still running at the invocation's end: parked (fenced),
//!   comes back after the re-attach interval, and its claim re-attaches;
//! - ran: succeeded / failed for good / retry beyond 12 h → acknowledged once recorded;
//!   retry within 12 h → comes back after the retry delay (visibility = delay,
//!   `next_run_at` = same); lease lost → acknowledged, nothing written;
//! - a panic anywhere in a step's execution (a `JoinError`) is a retryable
//!   `EXECUTOR_PANICKED` failure, recorded like any other;
//! - an outcome that could not be recorded (database trouble), or anything else the code
//!   did not settle: comes back.
//!
//! A message that names several steps (format 2, `RARA_STEPS_PER_MESSAGE`) is taken apart
//! into one record per step (same message id and receipt handle, the step's own body and
//! `traceparent`): each step gets its fate as above, and the message is acknowledged when all
//! of them are. A step that must come back (a retry, a hold, a park) within 15 minutes is
//! moved into a message of its own, sent with that delay when the batch ends; a later one, or
//! one whose send failed, brings the whole message back, hidden until the soonest of its
//! steps' instants (set once, when the batch ends), and on its return the steps that settled
//! are stale.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rara_domain::StepError;
use rara_domain::retry::RetryPolicy;
use rara_domain::step_error::codes;
use rara_queue::{MessageStep, Queue, StepMessage};
use rara_store::Store;
use rara_store::claim::{ClaimOutcome, ClaimRequest, ClaimedStep};
use tokio::task::{JoinError, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::execution::{self, Environment, Execution};
use crate::fate::Ack;
use crate::secrets::{EnvSecretResolver, SecretResolver};
use crate::settings::Settings;

pub use crate::fate::BatchReport;
pub use quick::QUICK_BOUND;

/// How long the outcomes of a batch wait for the steps that finish right after the first, to
/// be recorded in one statement: short steps started together finish within microseconds of
/// each other; a step that takes longer is recorded on its own, at most this much later.
pub const RECORD_WINDOW: Duration = Duration::from_millis(2);

mod map;
mod quick;
mod record;
mod references;
mod trace;
use record::Finished;
use trace::AttemptTrace;

/// A fresh claim of the step `name` running `operation` with `input`, for the unit tests of
/// the batch's passes.
#[cfg(test)]
fn test_claim(name: &str, operation: &str, input: serde_json::Value) -> ClaimedStep {
    let now = chrono::Utc::now();
    ClaimedStep {
        holder: rara_store::Holder { step_id: uuid::Uuid::new_v4(), worker: "w".into(), fence: 1 },
        run_id: uuid::Uuid::new_v4(),
        name: name.into(),
        operation: operation.into(),
        version: None,
        input,
        attempt: 1,
        max_attempts: 1,
        timeout: Duration::from_secs(1),
        retry_initial_delay: Duration::ZERO,
        retry_max_delay: Duration::ZERO,
        retry_multiplier: 1.0,
        lease_expires_at: now,
        took_over: false,
        attached_at: now,
        resume: None,
        started_at: now,
        map: None,
        map_index: None,
    }
}

/// One delivered message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub message_id: String,
    pub receipt_handle: String,
    pub body: String,
    pub traceparent: Option<String>,
    /// When the message was first sent, for its first delivery only (the queue age at claim);
    /// `None` when unknown or redelivered.
    pub sent_at: Option<SystemTime>,
}

/// The executor's batch processor. Built once per container; cheap to clone.
#[derive(Clone)]
pub struct BatchExecutor {
    env: Environment,
    worker: Arc<str>,
    non_retryable_codes: Arc<[String]>,
    shutdown_grace: Duration,
    delivery_timeout: Duration,
    reattach_interval: Duration,
    /// `RARA_MAX_INPUT_BYTES`: the largest input a step runs with, references substituted.
    max_input_bytes: usize,
    /// How long one Postgres call may take ([`Timeouts::db_call`](crate::timeouts::Timeouts::db_call)).
    db_call: Duration,
    /// The registry's quick operations ([`Executor::quick`](rara_domain::executor::Executor::quick)),
    /// known at start-up.
    quick_operations: Arc<[String]>,
}

impl std::fmt::Debug for BatchExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchExecutor").field("worker", &self.worker).finish_non_exhaustive()
    }
}

/// A claimed step while it runs: its record, the step (shared with its task), and its place
/// in its run's trace.
struct InFlight {
    record: Record,
    step: Arc<ClaimedStep>,
    trace: Option<AttemptTrace>,
}

impl BatchExecutor {
    pub fn new(
        store: Store,
        queue: Arc<dyn Queue>,
        registry: Arc<rara_domain::registry::Registry>,
        settings: &Settings,
    ) -> Self {
        let core = &settings.core;
        let cancels = crate::cancel::CancelWatch::new(store.clone());
        let quick_operations = registry.quick_names().into_iter().map(str::to_owned).collect();
        BatchExecutor {
            env: Environment {
                store,
                queue,
                registry,
                lease: core.lease_duration,
                attach_window: settings.attach_window,
                heartbeat_interval: core.heartbeat_interval,
                progress_interval: settings.progress_interval,
                secrets: Arc::new(EnvSecretResolver::from_env()),
                interrupt: CancellationToken::new(),
                cancels,
            },
            worker: core.worker_id.as_str().into(),
            non_retryable_codes: core.default_retry.non_retryable_codes.clone().into(),
            shutdown_grace: settings.timeouts.shutdown_grace,
            delivery_timeout: settings.delivery_timeout,
            reattach_interval: settings.reattach_interval,
            max_input_bytes: core.max_input_bytes,
            db_call: settings.timeouts.db_call(),
            quick_operations,
        }
    }

    /// Where the input's `{"$secret": "name"}` references are resolved (by default
    /// [`EnvSecretResolver::from_env`]).
    pub fn with_secrets(mut self, secrets: Arc<dyn SecretResolver>) -> Self {
        self.env.secrets = secrets;
        self
    }

    /// When `interrupt` fires (a stopping runner's grace is over), executions still running
    /// stop and their steps are given back, fenced; calls to SQS after it get a short bound.
    pub fn with_interrupt(mut self, interrupt: CancellationToken) -> Self {
        self.env.interrupt = interrupt;
        self
    }

    /// `RARA_SHUTDOWN_GRACE_SECONDS`: how long a stopping runner lets held executions go on.
    pub fn shutdown_grace(&self) -> Duration {
        self.shutdown_grace
    }

    pub fn worker(&self) -> &str {
        &self.worker
    }

    /// Processes one batch. Every execution ends by `deadline` (the invocation's end minus
    /// a margin). Only the records the report acknowledges may be deleted.
    pub async fn process(&self, records: Vec<Record>, deadline: Instant) -> BatchReport {
        let mut report = BatchReport::new(records.iter().map(|r| r.message_id.clone()).collect());
        let mut valid: Vec<(Record, StepMessage)> = Vec::with_capacity(records.len());
        for record in records {
            match rara_queue::parse_steps(&record.body) {
                Ok(steps) => {
                    report.packs(&record.message_id, steps.len());
                    unpack(record, steps, &mut valid);
                }
                Err(e) => self.dead_letter(record, e.code(), &e.to_string(), &mut report).await,
            }
        }
        if !valid.is_empty() {
            let mut running = JoinSet::new();
            let mut in_flight = HashMap::new();
            // Shortly after an interrupt, a claim or a recording that has not finished (a
            // silent Postgres) is given up: what it did not settle comes back.
            let interrupt = self.env.interrupt.clone();
            let valid = self.quick(valid, deadline, &mut report).await;
            let claimed =
                after_interrupt(&interrupt, self.claim(valid, deadline, &mut running, &mut in_flight, &mut report))
                    .await;
            if claimed.is_none()
                || after_interrupt(&interrupt, self.collect(running, in_flight, &mut report)).await.is_none()
            {
                tracing::error!(
                    "the batch did not settle after the interrupt (is Postgres answering?); its unsettled messages come back"
                );
            }
        }
        self.move_steps(&mut report).await;
        for (receipt_handle, at) in report.comebacks() {
            self.set_visibility(&receipt_handle, at.saturating_duration_since(Instant::now())).await;
        }
        report.close();
        report
    }

    /// Claims the batch in one statement and starts every claimed step in `running`.
    async fn claim(
        &self,
        valid: Vec<(Record, StepMessage)>,
        deadline: Instant,
        running: &mut JoinSet<Execution>,
        in_flight: &mut HashMap<tokio::task::Id, InFlight>,
        report: &mut BatchReport,
    ) {
        let requests: Vec<ClaimRequest> =
            valid.iter().map(|(_, m)| ClaimRequest { step_id: m.step_id, lease_token: m.lease_token }).collect();
        let claim_started = SystemTime::now();
        let claimed = self.db(self.env.store.claim(&self.worker, &requests, self.env.lease)).await;
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

    fn spawn(
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
        running.spawn(task.instrument(span)).id()
    }

    /// Records outcomes as the steps finish, in micro-batches: whatever finished together (within
    /// [`RECORD_WINDOW`] of the first) is recorded together (one statement per kind of outcome).
    async fn collect(
        &self,
        mut running: JoinSet<Execution>,
        mut in_flight: HashMap<tokio::task::Id, InFlight>,
        report: &mut BatchReport,
    ) {
        while let Some(first) = running.join_next_with_id().await {
            let mut joined = vec![first];
            // What finishes within RECORD_WINDOW of the first joins it: a batch of short steps
            // is one statement, not one per wave of completions (measured: 1.27 outcome
            // statements per batch of ten noop steps without the window).
            let window = Instant::now() + RECORD_WINDOW;
            loop {
                while let Some(more) = running.try_join_next_with_id() {
                    joined.push(more);
                }
                if running.is_empty() {
                    break;
                }
                match tokio::time::timeout_at(window, running.join_next_with_id()).await {
                    Ok(Some(more)) => joined.push(more),
                    _ => break,
                }
            }
            let mut finished = Vec::with_capacity(joined.len());
            let mut traces = Vec::new();
            {
                // The thread-local RNG is not Send: keep it out of the awaits below.
                let mut rng = rand::rng();
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
                    let plan = crate::fate::plan(execution, step.attempt, &self.policy(&step), &mut rng);
                    let (label, metric) = trace::outcome(&plan);
                    let ran = (chrono::Utc::now() - step.started_at).to_std().unwrap_or_default();
                    report.operations.attempt(&step.operation, metric, ran);
                    traces.extend(trace.map(|t| (t, label)));
                    finished.push(Finished {
                        record,
                        holder: step.holder.clone(),
                        attached_at: step.attached_at,
                        plan,
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

    /// One Postgres call, bounded client-side: facing a silent Postgres it fails (the
    /// records it concerns come back) and the runner goes on.
    async fn db<T>(&self, call: impl Future<Output = Result<T, rara_store::Error>>) -> Result<T, rara_store::Error> {
        crate::timeouts::db_call(self.db_call, call).await
    }

    /// Sets the message's visibility so that it comes back after `wait` (if that fails it
    /// comes back after the queue's visibility timeout and the claim tells it to wait again).
    /// It is not acknowledged. A step of a message of several is moved into a message of its
    /// own when the batch ends ([`move_steps`](Self::move_steps)); past SQS's longest delay its
    /// message is hidden once, when the batch ends, until the soonest instant its steps asked for.
    async fn come_back(&self, record: &Record, wait: Duration, report: &mut BatchReport) {
        if !report.is_packed(&record.message_id) {
            self.set_visibility(&record.receipt_handle, wait).await;
        } else if wait <= rara_queue::MAX_SEND_DELAY {
            report.move_at(record, Instant::now() + wait);
        } else {
            report.come_back_at(&record.message_id, &record.receipt_handle, Instant::now() + wait);
        }
    }

    /// Sends each step of a message of several that must come back in a message of its own,
    /// hidden until its instant (one `SendMessageBatch` per ten), and acknowledges it: its
    /// siblings' message is then deleted once they settle, and never returns for them nor
    /// counts a receive per sibling's retry. A step whose send failed brings its message back
    /// instead.
    async fn move_steps(&self, report: &mut BatchReport) {
        let moves = report.take_moves();
        if moves.is_empty() {
            return;
        }
        let now = Instant::now();
        let outgoing: Vec<rara_queue::Outgoing> = moves
            .iter()
            .enumerate()
            .map(|(i, (record, at))| rara_queue::Outgoing {
                id: i.to_string(),
                body: record.body.clone(),
                traceparent: record.traceparent.clone(),
                delay: at.saturating_duration_since(now),
            })
            .collect();
        let failed: Vec<String> = match after_interrupt(&self.env.interrupt, self.env.queue.send(&outgoing)).await {
            Some(Ok(failed)) => failed,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "could not move steps into messages of their own; their messages come back");
                outgoing.iter().map(|o| o.id.clone()).collect()
            }
            None => outgoing.iter().map(|o| o.id.clone()).collect(),
        };
        for (o, (record, at)) in outgoing.iter().zip(moves) {
            if failed.contains(&o.id) {
                report.come_back_at(&record.message_id, &record.receipt_handle, at);
            } else {
                report.counters.moved += 1;
                report.counters.messages += 1;
                report.acknowledge(record.message_id, Ack::Moved);
            }
        }
    }

    async fn set_visibility(&self, receipt_handle: &str, wait: Duration) {
        let change = self.env.queue.change_visibility(receipt_handle, wait);
        match after_interrupt(&self.env.interrupt, change).await {
            Some(Ok(())) => {}
            Some(Err(e)) => {
                tracing::warn!(error = %e, "could not set the message's visibility; it returns after the queue's timeout")
            }
            None => tracing::warn!(
                "gave up setting the message's visibility (stopping); it returns after the queue's timeout"
            ),
        }
    }

    async fn dead_letter(&self, record: Record, code: &str, reason: &str, report: &mut BatchReport) {
        match self.env.queue.dead_letter(&record.body, code, reason).await {
            Ok(()) => {
                report.counters.dead_lettered += 1;
                tracing::warn!(message_id = %record.message_id, code, reason, "message moved to the dead-letter queue");
                report.acknowledge(record.message_id, Ack::DeadLettered { code: code.to_owned() });
            }
            Err(e) => {
                tracing::error!(error = %e, code, "could not move a bad message to the DLQ; it comes back (redrive takes it there)");
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

/// One record per step of a message: the message's id and receipt handle, the step's own
/// body (format 1, so that a dead letter names only its step) and its run's `traceparent`.
fn unpack(record: Record, steps: Vec<MessageStep>, valid: &mut Vec<(Record, StepMessage)>) {
    if let [one] = steps.as_slice() {
        valid.push((record, one.message));
        return;
    }
    for MessageStep { message, traceparent } in steps {
        let step_record = Record {
            body: message.to_body(),
            traceparent: traceparent.or_else(|| record.traceparent.clone()),
            ..record.clone()
        };
        valid.push((step_record, message));
    }
}

/// The span of one step's execution: ids only, never its input or output. Exported as
/// `rara.execute` under the attempt's span ([`AttemptTrace::adopt`], which fills `trace_id`
/// and `span_id`, so every line of the step can be found in its trace).
fn step_span(step: &ClaimedStep) -> tracing::Span {
    tracing::info_span!(
        "step",
        otel.name = "rara.execute",
        run_id = %step.run_id,
        step_id = %step.holder.step_id,
        attempt = step.attempt,
        fence = step.holder.fence,
        operation = %step.operation,
        trace_id = tracing::field::Empty,
        span_id = tracing::field::Empty,
    )
}

/// A step's execution that ended in a `JoinError`: a retryable failure. The panic's
/// payload is not kept (it may hold anything, a resolved secret included).
fn panicked(join: &JoinError) -> Execution {
    tracing::error!(panic = join.is_panic(), "a step's execution ended abnormally; recorded as EXECUTOR_PANICKED");
    Execution::Failed(StepError::retryable(
        codes::EXECUTOR_PANICKED,
        if join.is_panic() { "the step's execution panicked" } else { "the step's execution was aborted" },
    ))
}

/// How long a call to the queue may still take once a stopping runner's grace is over.
pub const LAST_CALL_BOUND: Duration = Duration::from_secs(2);

/// Runs `call`; once `interrupt` has fired, for at most [`LAST_CALL_BOUND`] more (`None`:
/// given up).
pub async fn after_interrupt<T>(interrupt: &CancellationToken, call: impl Future<Output = T>) -> Option<T> {
    let cut = async {
        interrupt.cancelled().await;
        tokio::time::sleep(LAST_CALL_BOUND).await;
    };
    tokio::select! {
        out = call => Some(out),
        _ = cut => None,
    }
}
