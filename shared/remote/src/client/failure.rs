//! How a call ended without an outcome ([`Stop`], [`Interrupted`]) and every failure of a
//! call as a classified [`StepError`] (the tables in the [`client`](super) module's doc).

use std::time::Duration;

use rara_domain::StepError;
use rara_domain::executor::{ExecutionContext, ReportError};
use rara_domain::step_error::codes;
use tonic::{Code, Status};

use super::RemoteExecutor;
use crate::transport::IDLE_HEARTBEATS;
use crate::{bounds, pb};

/// Why a call stopped before its stream gave an outcome.
#[derive(Debug, Clone, Copy)]
pub(super) enum Stop {
    Cancelled,
    LeaseLost,
    Deadline,
}

impl Stop {
    pub(super) fn reason(self) -> &'static str {
        match self {
            Self::Cancelled => "the step was cancelled",
            Self::LeaseLost => "rara lost the step's lease",
            Self::Deadline => "the attempt's deadline passed",
        }
    }
}

/// How a stream ended without a result to return as is.
#[derive(Debug)]
pub(super) enum Interrupted {
    Failed(StepError),
    LeaseLost,
    /// The invocation ends: the client let go of a detachable attempt, which goes on.
    Parked,
}

impl RemoteExecutor {
    /// The retryable `EXECUTOR_UNAVAILABLE` of a call silent for its idle timeout.
    pub(super) fn idle(&self, idle: Duration, when: &str) -> StepError {
        let message = format!(
            "remote executor {} for {}: the stream sent nothing for {} ms ({IDLE_HEARTBEATS} heartbeat intervals) {when}",
            self.endpoint,
            self.operation,
            idle.as_millis(),
        );
        StepError::retryable(codes::EXECUTOR_UNAVAILABLE, message).with_details(
            serde_json::json!({ "endpoint": &*self.endpoint, "idle_timeout_ms": idle.as_millis() as u64 }),
        )
    }

    /// What a refused `Attach` means: the attempt is lost (a new one runs), this holder is
    /// refused, or the executor cannot be reached now (park again: the attempt may still run).
    pub(super) fn attach_refused(&self, status: &Status) -> Interrupted {
        let refused = |code: &str, what: &str| {
            Interrupted::Failed(
                self.located(
                    StepError::retryable(code, format!("{what}: {}", status.message()))
                        .with_details(serde_json::json!({ "grpc_code": format!("{:?}", status.code()) })),
                ),
            )
        };
        match status.code() {
            Code::NotFound => refused(
                codes::ATTEMPT_NOT_FOUND,
                "the remote executor no longer knows the detached attempt; a new attempt runs",
            ),
            // PERMISSION_DENIED: the attempt's secret was not accepted.
            Code::FailedPrecondition | Code::InvalidArgument | Code::PermissionDenied => {
                refused(codes::ATTACH_REFUSED, "the remote executor refused to re-attach")
            }
            Code::Unimplemented => Interrupted::Failed(self.unavailable(status, "re-attaching is not supported")),
            _ => {
                tracing::warn!(
                    endpoint = %self.endpoint, code = ?status.code(), status = status.message(),
                    "could not re-attach; the attempt stays detached and is tried again later"
                );
                Interrupted::Parked
            }
        }
    }

    /// The contract's output: a JSON object; empty means `{}` (as for `input_json`). Anything
    /// else (not JSON, or JSON that is not an object) is a permanent `PROTOCOL_VIOLATION`.
    pub(super) fn output(&self, output_json: &str) -> Result<serde_json::Value, StepError> {
        if output_json.trim().is_empty() {
            return Ok(serde_json::json!({}));
        }
        let violation = |what: String| self.located(StepError::permanent(codes::PROTOCOL_VIOLATION, what));
        match serde_json::from_str::<serde_json::Value>(output_json) {
            Ok(output @ serde_json::Value::Object(_)) => Ok(output),
            Ok(other) => Err(violation(format!(
                "the succeeded event's output_json must be a JSON object, not {}",
                json_kind(&other)
            ))),
            Err(err) => Err(violation(format!("the succeeded event's output_json is not JSON ({err})"))),
        }
    }

    pub(super) fn remote_error(&self, error: Option<pb::Error>) -> StepError {
        let Some(error) = error else {
            return self.located(StepError::permanent(codes::PROTOCOL_VIOLATION, "a failed event carried no error"));
        };
        let details = serde_json::Value::Object(error.details.into_iter().filter_map(|(k, v)| detail(k, v)).collect());
        let code = if error.code.is_empty() { "REMOTE_ERROR".to_owned() } else { error.code };
        bounds::bounded_error(StepError { code, message: error.message, retryable: error.retryable, details })
    }

    pub(super) fn unavailable(&self, status: &Status, when: &str) -> StepError {
        let message = format!(
            "remote executor {} for {}: {when}: {:?}: {}{}",
            self.endpoint,
            self.operation,
            status.code(),
            status.message(),
            hint(status)
        );
        let error = if status.code() == Code::Unimplemented {
            StepError::permanent(codes::EXECUTOR_UNAVAILABLE, message)
        } else {
            StepError::retryable(codes::EXECUTOR_UNAVAILABLE, message)
        };
        error.with_details(serde_json::json!({
            "endpoint": &*self.endpoint,
            "grpc_code": format!("{:?}", status.code()),
        }))
    }

    /// Names the endpoint and operation in an error this client raised (see [`hint`]).
    pub(super) fn located(&self, mut error: StepError) -> StepError {
        error.message = format!("{} ({} on {})", error.message, self.operation, self.endpoint);
        error.with_details(serde_json::json!({ "endpoint": &*self.endpoint, "operation": self.operation }))
    }

    /// The placeholder error of a parked attempt: the runtime reads `ctx.detach` instead.
    pub(super) fn parked(&self, ctx: &ExecutionContext) -> StepError {
        ctx.detach.let_go();
        tracing::info!(
            step_id = %ctx.step_id, attempt = ctx.attempt, endpoint = %self.endpoint,
            sequence = ctx.detach.resume_point().map_or(0, |r| r.sequence), "remote attempt parked; it goes on detached"
        );
        StepError::retryable(codes::EXECUTOR_UNAVAILABLE, "the attempt was parked before its outcome")
    }

    pub(super) fn stopped(&self, stop: Stop) -> StepError {
        let error = match stop {
            Stop::Cancelled => {
                StepError::permanent(codes::CANCELLED, "the step was cancelled; the remote attempt was told to stop")
            }
            Stop::LeaseLost => StepError::permanent(
                codes::CANCELLED,
                "the lease was lost while the step ran; the remote attempt was told to stop",
            ),
            Stop::Deadline => StepError::retryable(codes::DEADLINE_EXCEEDED, "the attempt ran past its deadline"),
        };
        self.located(error)
    }
}

/// A reporter's answer: a lost lease stops the execution; a report that could not be
/// recorded is logged and the execution goes on.
pub(super) fn report(result: Result<(), ReportError>) -> Result<(), Interrupted> {
    match result {
        Ok(()) => Ok(()),
        Err(ReportError::LeaseLost) => Err(Interrupted::LeaseLost),
        Err(err @ ReportError::Unavailable(_)) => {
            tracing::warn!(error = %err, "a report from the remote executor was not recorded");
            Ok(())
        }
    }
}

/// One detail of a remote error: a string, except `retry_after_seconds`, which decides the
/// retry's delay: a number clamped to [`MAX_RETRY_AFTER`](rara_domain::retry::MAX_RETRY_AFTER)
/// here, before anything converts it (dropped when it is not a non-negative number).
fn detail(key: String, value: String) -> Option<(String, serde_json::Value)> {
    if key == "retry_after_seconds" {
        let seconds = bounds::retry_after_seconds(&value);
        if seconds.is_none() {
            tracing::warn!("a remote error's retry_after_seconds is not a non-negative number; ignored");
        }
        let number = serde_json::Number::from_f64(seconds?)?;
        return Some((key, serde_json::Value::Number(number)));
    }
    Some((key, serde_json::Value::String(value)))
}

/// What kind of JSON value `value` is, for a violation's message (never the value itself).
fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// What to check when a call was refused for who rara is (or who the executor is).
fn hint(status: &Status) -> &'static str {
    if status.code() == Code::Unauthenticated {
        " (the executor refused rara's credential: check RARA_REMOTE_TOKEN against its RARA_EXECUTOR_TOKENS)"
    } else if status.message().contains("certificate") {
        " (TLS: is RARA_REMOTE_CA_FILE the CA that signed the executor's certificate?)"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_retry_after_is_a_clamped_number_and_a_bad_one_is_dropped() {
        let max = rara_domain::retry::MAX_RETRY_AFTER.as_secs_f64();
        assert_eq!(
            detail("retry_after_seconds".into(), "1e300".into()),
            Some(("retry_after_seconds".into(), max.into()))
        );
        assert_eq!(detail("retry_after_seconds".into(), "NaN".into()), None);
        assert_eq!(detail("retry_after_seconds".into(), "-5".into()), None);
        assert_eq!(detail("other".into(), "1e300".into()), Some(("other".into(), "1e300".into())));
    }

    #[test]
    fn report_errors_stop_only_on_a_lost_lease() {
        assert!(matches!(report(Err(ReportError::LeaseLost)), Err(Interrupted::LeaseLost)));
        assert!(report(Err(ReportError::Unavailable("db".into()))).is_ok());
    }
}
