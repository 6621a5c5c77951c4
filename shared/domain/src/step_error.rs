//! The structured error a failed step carries: code, message, retryable flag, details.

use serde::{Deserialize, Serialize};

/// Well-known error codes. Executors may use their own codes beside these.
pub mod codes {
    /// No in-process registration and no remote capability matches the operation (and version).
    pub const UNKNOWN_OPERATION: &str = "UNKNOWN_OPERATION";
    /// The holder's lease expired and no attempts were left.
    pub const LEASE_EXPIRED: &str = "LEASE_EXPIRED";
    /// The execution ran past its deadline.
    pub const DEADLINE_EXCEEDED: &str = "DEADLINE_EXCEEDED";
    /// A dependency failed or was cancelled, so the step never ran.
    pub const DEPENDENCY_FAILED: &str = "DEPENDENCY_FAILED";
    /// An operator cancelled the step or its run.
    pub const CANCELLED: &str = "CANCELLED";
    /// The executor panicked or its task died.
    pub const EXECUTOR_PANICKED: &str = "EXECUTOR_PANICKED";
    /// The runner stopped (SIGTERM, Ctrl-C) before the step finished: the attempt was given
    /// back and the step is due again for another executor.
    pub const EXECUTOR_SHUTDOWN: &str = "EXECUTOR_SHUTDOWN";
    /// The step's input does not fit the operation.
    pub const INVALID_INPUT: &str = "INVALID_INPUT";
    /// A remote executor broke the event order of the contract.
    pub const PROTOCOL_VIOLATION: &str = "PROTOCOL_VIOLATION";
    /// A remote executor could not be reached or vanished mid-stream.
    pub const EXECUTOR_UNAVAILABLE: &str = "EXECUTOR_UNAVAILABLE";
    /// A secret the input references does not exist (the error names it, never a value).
    pub const SECRET_NOT_FOUND: &str = "SECRET_NOT_FOUND";
    /// The secret store could not answer; another attempt may.
    pub const SECRET_UNAVAILABLE: &str = "SECRET_UNAVAILABLE";
    /// The step ran until its invocation's end, longer than one invocation allows, and its
    /// executor cannot detach (an in-process one, or a remote capability that does not
    /// advertise it): another attempt would hit the same wall, so it is not retried.
    pub const STEP_OUTLIVES_INVOCATION: &str = "STEP_OUTLIVES_INVOCATION";
    /// Re-attaching found that the remote executor no longer knows the detached attempt (it
    /// restarted, or the attempt ended longer ago than its retention): a new attempt runs.
    pub const ATTEMPT_NOT_FOUND: &str = "ATTEMPT_NOT_FOUND";
    /// The remote executor refused to re-attach this holder (an older fence): a new attempt runs.
    pub const ATTACH_REFUSED: &str = "ATTACH_REFUSED";
    /// The step pins a version of an operation that remote executors offer, but no server
    /// offers that version right now (it may be deploying, or rolled back): retried, so a
    /// version deployed seconds ago still runs; the step fails after its attempts.
    pub const VERSION_UNAVAILABLE: &str = "VERSION_UNAVAILABLE";
    /// A reference in the step's input (`$output`, `$artifact`, `$input`) found nothing at
    /// claim (the error names the field, the upstream step and the pointer, never a value).
    pub const INPUT_REFERENCE_MISSING: &str = "INPUT_REFERENCE_MISSING";
    /// The values the step's input references could not be read or its resolved input could
    /// not be recorded (database trouble); another attempt may.
    pub const INPUT_REFERENCE_UNAVAILABLE: &str = "INPUT_REFERENCE_UNAVAILABLE";
    /// A child of a map step (`for_each`) did not succeed: the map step fails (written by the
    /// store's `finish_tail.sql`).
    pub const MAP_CHILD_FAILED: &str = "MAP_CHILD_FAILED";
    /// An outbound connection (or a redirect) would reach an address or host the egress policy
    /// does not open (loopback, link-local, private, ...): permanent; the error names the host,
    /// never what the request carried.
    pub const EGRESS_DENIED: &str = "EGRESS_DENIED";
    /// The step's input references a secret that no grant gives its workflow or operation
    /// (or gives it only for other hosts): permanent; the error names the secret, never a value.
    pub const SECRET_NOT_GRANTED: &str = "SECRET_NOT_GRANTED";
    /// What an executor returned (an output, an error's message or details, an artifact, a
    /// progress message) exceeds its bound: the attempt fails permanently; the error names the
    /// field and the bound.
    pub const OUTPUT_TOO_LARGE: &str = "OUTPUT_TOO_LARGE";
    /// The run passed its deadline (`timeout_seconds` at the definition's top level, or
    /// `rara submit --timeout`): every unfinished step was cancelled with this code.
    pub const RUN_TIMED_OUT: &str = "RUN_TIMED_OUT";
    /// The artifact store could not be written or read (an output beyond the inline bound
    /// could not be offloaded, an offloaded output a reference points into could not be
    /// read): retryable.
    pub const ARTIFACT_STORE_UNAVAILABLE: &str = "ARTIFACT_STORE_UNAVAILABLE";
    /// A child workflow step's child run failed or was cancelled: the step fails for good
    /// (details: the child run, how it ended, its first failed step and that step's code).
    pub const CHILD_WORKFLOW_FAILED: &str = "CHILD_WORKFLOW_FAILED";
    /// A child workflow step's workflow is not registered, or does not plan with the inputs
    /// given (the problems, each at its field): permanent.
    pub const CHILD_WORKFLOW_INVALID: &str = "CHILD_WORKFLOW_INVALID";
    /// A child workflow would nest deeper than
    /// [`MAX_CHILD_DEPTH`](crate::workflow::child::MAX_CHILD_DEPTH): permanent.
    pub const CHILD_DEPTH_EXCEEDED: &str = "CHILD_DEPTH_EXCEEDED";
}

/// A structured, classified failure. `retryable` alone decides between "retry" and "fail".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct StepError {
    pub code: String,
    pub message: String,
    pub retryable: bool,
    /// Extra machine-readable context, an object; `{}` when there is none (rara's own errors
    /// and an executor's alike).
    #[serde(default = "no_details", skip_serializing_if = "serde_json::Value::is_null")]
    pub details: serde_json::Value,
}

fn no_details() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

impl StepError {
    /// A failure that another attempt may cure.
    pub fn retryable(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self { code: code.into(), message: message.into(), retryable: true, details: no_details() }
    }

    /// A failure that no further attempt can cure.
    pub fn permanent(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self { code: code.into(), message: message.into(), retryable: false, details: no_details() }
    }

    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = details;
        self
    }

    /// The JSON stored in Postgres (`steps.error`, `step_attempts.error`).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
            "details": self.details,
        })
    }
}

#[cfg(test)]
mod details_tests {
    use super::*;

    #[test]
    fn an_error_without_details_carries_an_empty_object_like_an_executors() {
        let own = StepError::retryable(codes::EXECUTOR_UNAVAILABLE, "down");
        assert_eq!(own.to_json()["details"], serde_json::json!({}));
        let read: StepError = serde_json::from_str(r#"{"code":"X","message":"m","retryable":false}"#).unwrap();
        assert_eq!(read.details, serde_json::json!({}), "a stored error without details reads as {{}}");
    }
}
