//! The executor's batch (one SQS event, or one local receive): parse every message, claim
//! the valid ones in one statement, run the claimed steps concurrently, record their
//! outcomes in micro-batches as they finish, and say which messages were settled.
//!
//! A message's fate ([`crate::executor::fate`]): only what is explicitly acknowledged is deleted;
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
//!
//! # Layout
//!
//! - this file: the [`BatchExecutor`], how it is built, and [`process`](BatchExecutor::process),
//!   the batch from end to end.
//! - `quick.rs`: quick steps, run and recorded in the transaction of their lock.
//! - `claim.rs`: the claim in one statement and the spawn of each claimed step.
//! - `references.rs`: the claimed inputs' references substituted (data flow); `map.rs`: the
//!   map steps' claims; `child.rs`: the claims of steps that run a workflow (child runs).
//! - `collect.rs`: executions collected as they finish and judged ([`crate::executor::fate`]).
//! - `record.rs`: the verdicts recorded in micro-batches, one statement per kind.
//! - `comeback.rs`: visibility, moved steps and dead letters.
//! - `trace.rs`: the spans of an attempt (claim, execute, outcome).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use rara_domain::StepError;
use rara_domain::retry::RetryPolicy;
use rara_domain::step_error::codes;
use rara_queue::{MessageStep, Queue, StepMessage};
use rara_store::Store;
use rara_store::claim::ClaimedStep;
use tokio::task::{JoinError, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::executor::execution::{Environment, Execution};
use crate::executor::fate::Record;
use crate::interrupt::after_interrupt;
use crate::secrets::{NoSecrets, SecretResolver};
use crate::settings::Settings;

pub use crate::executor::fate::BatchReport;
pub use quick::QUICK_BOUND;

/// How long the outcomes of a batch wait for the next step to finish, to be recorded in one
/// statement: short steps started together finish within microseconds of each other, and a
/// wave of them keeps the window open (each finish opens it anew, for at most
/// [`RECORD_WINDOW_MAX`] after the first); a step that takes longer is recorded on its own.
pub const RECORD_WINDOW: Duration = Duration::from_millis(2);

/// The longest the first outcome of a micro-batch waits for the steps finishing after it
/// ([`RECORD_WINDOW`]).
pub const RECORD_WINDOW_MAX: Duration = Duration::from_millis(10);

mod child;
mod claim;
mod collect;
mod comeback;
mod map;
mod quick;
mod record;
mod references;
mod stored;
mod trace;
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
    /// The configuration child workflow runs are planned with (`child.rs`).
    core: Arc<rara_domain::config::Config>,
    /// `RARA_MAX_GATHERED_BYTES`: the most a map step gathers of its children's outputs.
    max_gathered_bytes: usize,
    /// How long one Postgres call may take ([`Timeouts::db_call`](crate::timeouts::Timeouts::db_call)).
    db_call: Duration,
    /// The registry's quick operations ([`Executor::quick`](rara_domain::executor::Executor::quick)),
    /// known at start-up.
    quick_operations: Arc<[String]>,
    /// Where the retry backoff's jitter is drawn from: seeded from entropy, or by
    /// [`with_jitter_seed`](Self::with_jitter_seed) so that a test's retry delays repeat.
    jitter: Arc<Mutex<StdRng>>,
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
        let cancels = crate::executor::cancel_watch::CancelWatch::new(store.clone());
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
                returns: settings.returns,
                secrets: Arc::new(NoSecrets),
                interrupt: CancellationToken::new(),
                cancels,
                artifacts: crate::executor::offload::Offload::inline(),
            },
            worker: core.worker_id.as_str().into(),
            non_retryable_codes: core.default_retry.non_retryable_codes.clone().into(),
            shutdown_grace: settings.timeouts.shutdown_grace,
            delivery_timeout: settings.delivery_timeout,
            reattach_interval: settings.reattach_interval,
            max_input_bytes: core.max_input_bytes,
            core: Arc::new(core.clone()),
            max_gathered_bytes: settings.max_gathered_bytes,
            db_call: settings.timeouts.db_call(),
            quick_operations,
            jitter: Arc::new(Mutex::new(StdRng::from_os_rng())),
        }
    }

    /// Draws the retry backoff's jitter from a generator seeded with `seed` (by default it is
    /// seeded from entropy): the same seed and the same sequence of retries give the same
    /// delays. Clones of the executor share the generator.
    pub fn with_jitter_seed(mut self, seed: u64) -> Self {
        self.jitter = Arc::new(Mutex::new(StdRng::seed_from_u64(seed)));
        self
    }

    /// Where the input's `{"$secret": "name"}` references are resolved (by default nowhere:
    /// [`NoSecrets`]; the platform's wiring sets the resolver of `RARA_SECRETS_BACKEND`).
    pub fn with_secrets(mut self, secrets: Arc<dyn SecretResolver>) -> Self {
        self.env.secrets = secrets;
        self
    }

    /// Outputs beyond `settings.inline_output_bytes` go to `store` (`RARA_ARTIFACTS_URI`;
    /// by default there is none and every output stays inline), and references that point
    /// into offloaded outputs are read from it.
    pub fn with_artifacts(
        mut self,
        store: std::sync::Arc<dyn rara_artifacts::ArtifactStore>,
        settings: &Settings,
    ) -> Self {
        self.env.artifacts = crate::executor::offload::Offload::to(store, settings.inline_output_bytes);
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

    /// One Postgres call, bounded client-side: facing a silent Postgres it fails (the
    /// records it concerns come back) and the runner goes on.
    async fn db<T>(&self, call: impl Future<Output = Result<T, rara_store::Error>>) -> Result<T, rara_store::Error> {
        crate::timeouts::db_call(self.db_call, call).await
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

/// The claim's pairs (step id, lease token) of the batch's steps, in its order.
fn requests(valid: &[(Record, StepMessage)]) -> Vec<rara_store::claim::ClaimRequest> {
    valid
        .iter()
        .map(|(_, m)| rara_store::claim::ClaimRequest { step_id: m.step_id, lease_token: m.lease_token })
        .collect()
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
