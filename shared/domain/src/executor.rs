//! The [`Executor`] trait every in-process or remote executor implements, and the context
//! one execution receives: who it runs for (ids, attempt, fence), its deadline, a
//! cancellation signal and a reporter for progress and artifacts.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::StepError;

/// Runs one operation. Registered under an explicit name in a `Registry` (the `registry`
/// module).
#[async_trait::async_trait]
pub trait Executor: Send + Sync + 'static {
    /// The version this executor answers to when a step pins one.
    fn version(&self) -> &str {
        "1"
    }

    /// Whether an attempt of this executor may outlive the invocation that started it
    /// (DESIGN.md "Long steps"): a remote capability that advertises it. Such an executor
    /// honours [`Detach`]: when `ctx.detach.park` fires it lets go of the attempt without
    /// stopping it, and with `ctx.detach.resume` it re-attaches instead of starting one.
    /// In-process executors run inside the invocation and cannot.
    fn detachable(&self) -> bool {
        false
    }

    /// Whether the step may run inside its claim's transaction (DESIGN.md "Quick steps"): it
    /// finishes within milliseconds, touches nothing outside, reports nothing, and may run
    /// again if that transaction does not commit, or if its commit, which does not wait for
    /// the WAL flush, is lost in a crash of Postgres.
    fn quick(&self) -> bool {
        false
    }

    /// Runs the step. The executor must stop promptly when `ctx.cancel` fires and must not
    /// outlive `ctx.deadline`; the caller enforces both anyway.
    async fn execute(&self, ctx: ExecutionContext, input: serde_json::Value) -> Result<serde_json::Value, StepError>;
}

/// Where a detached remote attempt runs and the last of its events rara recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume {
    /// The remote executor's endpoint (`scheme://host:port`).
    pub endpoint: String,
    /// The last event sequence recorded; re-attaching asks for the events after it.
    pub sequence: u64,
}

/// How a detachable execution lets go of its attempt and picks it up again.
#[derive(Debug, Clone, Default)]
pub struct Detach {
    /// Set when this execution re-attaches to a parked attempt.
    pub resume: Option<Resume>,
    /// Fires when the invocation is about to end: a detachable executor stops reading the
    /// attempt's events (between two events, never while recording one) and returns; the
    /// remote attempt goes on.
    pub park: CancellationToken,
    /// The endpoint that runs the attempt, set by the executor once the attempt runs there.
    endpoint: Arc<OnceLock<String>>,
    /// The last event sequence the executor recorded.
    sequence: Arc<AtomicU64>,
    /// Set by the executor when it let go of the attempt, which goes on detached.
    let_go: Arc<std::sync::atomic::AtomicBool>,
}

impl Detach {
    /// A detach that re-attaches at `resume` (or starts afresh with `None`).
    pub fn new(resume: Option<Resume>) -> Self {
        let sequence = Arc::new(AtomicU64::new(resume.as_ref().map_or(0, |r| r.sequence)));
        let endpoint = Arc::new(OnceLock::new());
        if let Some(r) = &resume {
            let _ = endpoint.set(r.endpoint.clone());
        }
        Detach { resume, park: CancellationToken::new(), endpoint, sequence, let_go: Default::default() }
    }

    /// The executor let go of the attempt (at `park`, or because it could not re-attach
    /// now): it goes on detached, and [`resume_point`](Self::resume_point) says where.
    pub fn let_go(&self) {
        self.let_go.store(true, Ordering::SeqCst);
    }

    /// Whether the executor let go of the attempt.
    pub fn was_let_go(&self) -> bool {
        self.let_go.load(Ordering::SeqCst)
    }

    /// The executor says where the attempt runs.
    pub fn runs_on(&self, endpoint: &str) {
        let _ = self.endpoint.set(endpoint.to_owned());
    }

    /// The executor recorded the event `sequence`.
    pub fn recorded(&self, sequence: u64) {
        self.sequence.fetch_max(sequence, Ordering::SeqCst);
    }

    /// Where to re-attach, once the attempt runs somewhere.
    pub fn resume_point(&self) -> Option<Resume> {
        let endpoint = self.endpoint.get()?.clone();
        Some(Resume { endpoint, sequence: self.sequence.load(Ordering::SeqCst) })
    }
}

/// What one execution knows about itself.
#[derive(Clone)]
pub struct ExecutionContext {
    pub run_id: Uuid,
    pub step_id: Uuid,
    /// For a child of a map step (`for_each`): the index of its element in the map's list.
    pub map_index: Option<u32>,
    pub operation: String,
    /// The pinned capability version, if the step pins one.
    pub version: Option<String>,
    /// 1-based attempt number.
    pub attempt: u32,
    /// The fencing token of this attempt: systems the step touches can reject older holders.
    pub fence: i64,
    /// The execution must be over by then.
    pub deadline: Instant,
    /// Fires when the step is cancelled or its lease is lost.
    pub cancel: CancellationToken,
    /// Why `cancel` fired, set before it fires (an operator's cancel with its reason, the
    /// run cancelled, the lease lost, the deadline): what a remote executor is told.
    pub stop_reason: StopReason,
    pub reporter: Arc<dyn Reporter>,
    /// Parking and re-attaching, for executors that are [`Executor::detachable`].
    pub detach: Detach,
}

impl std::fmt::Debug for ExecutionContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutionContext")
            .field("run_id", &self.run_id)
            .field("step_id", &self.step_id)
            .field("map_index", &self.map_index)
            .field("operation", &self.operation)
            .field("attempt", &self.attempt)
            .field("fence", &self.fence)
            .finish_non_exhaustive()
    }
}

/// Why an execution was told to stop. Whoever fires the cancellation sets it first; the
/// first reason set wins.
#[derive(Debug, Clone, Default)]
pub struct StopReason(Arc<std::sync::OnceLock<String>>);

impl StopReason {
    /// Records `reason` unless one was recorded already.
    pub fn set(&self, reason: impl Into<String>) {
        let _ = self.0.set(reason.into());
    }

    pub fn get(&self) -> Option<&str> {
        self.0.get().map(String::as_str)
    }
}

/// A file or object a step produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Artifact {
    pub name: String,
    pub uri: String,
    pub media_type: Option<String>,
    pub size_bytes: Option<i64>,
    /// e.g. `sha256:<hex>`
    pub digest: Option<String>,
}

/// Why a report could not be recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    /// The lease is gone: the execution must stop and write nothing more.
    #[error("the lease was lost; the execution must stop")]
    LeaseLost,
    #[error("the report could not be recorded: {0}")]
    Unavailable(String),
}

/// Where an execution reports progress and artifacts (Postgres, fenced, in production).
#[async_trait::async_trait]
pub trait Reporter: Send + Sync {
    /// `fraction` in `0.0..=1.0`. Implementations may throttle.
    async fn progress(&self, fraction: f64, message: &str) -> Result<(), ReportError>;
    async fn artifact(&self, artifact: Artifact) -> Result<(), ReportError>;
    /// The capability version a remote executor says the attempt runs at (recorded on the
    /// attempt). By default not recorded.
    async fn version(&self, _version: &str) -> Result<(), ReportError> {
        Ok(())
    }

    /// Streams `body` into the artifact store (`RARA_ARTIFACTS_URI`) as this attempt's artifact
    /// `name` (memory bounded by one part, its sha256 computed while it is written) and records
    /// it as [`artifact`](Self::artifact) does; the artifact recorded, for the executor's
    /// output. By default there is no store: [`ReportError::Unavailable`].
    async fn store_artifact(
        &self,
        name: &str,
        _body: ArtifactBody,
        _media_type: Option<&str>,
    ) -> Result<Artifact, ReportError> {
        Err(ReportError::Unavailable(format!(
            "artifact {name:?}: no artifact store is configured (RARA_ARTIFACTS_URI)"
        )))
    }
}

/// The bytes an in-process executor stores as an artifact ([`Reporter::store_artifact`]).
pub type ArtifactBody = std::pin::Pin<Box<dyn tokio::io::AsyncRead + Send>>;

/// A reporter that drops everything, for executions nobody watches (tests, tools).
#[derive(Debug, Default, Clone, Copy)]
pub struct DiscardReporter;

#[async_trait::async_trait]
impl Reporter for DiscardReporter {
    async fn progress(&self, _fraction: f64, _message: &str) -> Result<(), ReportError> {
        Ok(())
    }
    async fn artifact(&self, _artifact: Artifact) -> Result<(), ReportError> {
        Ok(())
    }
}
