//! The [`Executor`] trait every in-process or remote executor implements, and the context
//! one execution receives: who it runs for (ids, attempt, fence), its deadline, a
//! cancellation signal and a reporter for progress and artifacts.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::StepError;

/// Runs one operation. Registered under an explicit name in the [`crate::registry::Registry`].
#[async_trait::async_trait]
pub trait Executor: Send + Sync + 'static {
    /// The version this executor answers to when a step pins one.
    fn version(&self) -> &str {
        "1"
    }

    /// Runs the step. The executor must stop promptly when `ctx.cancel` fires and must not
    /// outlive `ctx.deadline`; the caller enforces both anyway.
    async fn execute(&self, ctx: ExecutionContext, input: serde_json::Value) -> Result<serde_json::Value, StepError>;
}

/// What one execution knows about itself.
#[derive(Clone)]
pub struct ExecutionContext {
    pub run_id: Uuid,
    pub step_id: Uuid,
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
}

impl std::fmt::Debug for ExecutionContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutionContext")
            .field("run_id", &self.run_id)
            .field("step_id", &self.step_id)
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
}

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
