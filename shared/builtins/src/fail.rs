//! `fail`: input `{"fail_attempts": N, "retryable": true|false, "retry_after_seconds": S}`
//! (`retryable` defaults to true). Attempts `1..=N` fail with code `INJECTED_FAILURE`; later
//! attempts succeed with `{"attempt": n}`. `retry_after_seconds` (0 to
//! [`MAX_RETRY_AFTER`](rara_domain::retry::MAX_RETRY_AFTER)) is put in the error's details, as
//! `http.request` does from `Retry-After`, and sets the next attempt's delay exactly. For demos
//! and tests of the retry path.

use rara_domain::StepError;
use rara_domain::executor::{ExecutionContext, Executor};
use serde::Deserialize;

use crate::input;

/// The operation name.
pub const NAME: &str = "fail";
/// The code of every injected failure.
pub const INJECTED_FAILURE: &str = "INJECTED_FAILURE";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object like {\"fail_attempts\": 2, \"retryable\": true}")]
struct Input {
    fail_attempts: u32,
    #[serde(default = "retryable_by_default")]
    retryable: bool,
    #[serde(default)]
    retry_after_seconds: Option<f64>,
}

fn retryable_by_default() -> bool {
    true
}

/// Fails the first `fail_attempts` attempts, then succeeds.
#[derive(Debug, Default, Clone, Copy)]
pub struct Fail;

#[async_trait::async_trait]
impl Executor for Fail {
    async fn execute(&self, ctx: ExecutionContext, input: serde_json::Value) -> Result<serde_json::Value, StepError> {
        let Input { fail_attempts, retryable, retry_after_seconds } = input::parse(NAME, input)?;
        let max = rara_domain::retry::MAX_RETRY_AFTER.as_secs_f64();
        if retry_after_seconds.is_some_and(|s| !(0.0..=max).contains(&s)) {
            let problem = format_args!("must be a number of seconds from 0 to {max}");
            return Err(input::invalid(NAME, "retry_after_seconds", problem));
        }
        let attempt = ctx.attempt;
        if attempt > fail_attempts {
            return Ok(serde_json::json!({ "attempt": attempt }));
        }
        let message = format!("fail: injected failure on attempt {attempt} of {fail_attempts}");
        let error = if retryable {
            StepError::retryable(INJECTED_FAILURE, message)
        } else {
            StepError::permanent(INJECTED_FAILURE, message)
        };
        let mut details = serde_json::json!({ "attempt": attempt, "fail_attempts": fail_attempts });
        if let Some(seconds) = retry_after_seconds {
            details["retry_after_seconds"] = seconds.into();
        }
        Err(error.with_details(details))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::context;
    use rara_domain::step_error::codes;
    use serde_json::json;

    async fn run(attempt: u32, input: serde_json::Value) -> Result<serde_json::Value, StepError> {
        let (mut ctx, _) = context();
        ctx.attempt = attempt;
        Fail.execute(ctx, input).await
    }

    #[tokio::test]
    async fn the_first_n_attempts_fail_and_the_next_one_succeeds() {
        let input = json!({ "fail_attempts": 2, "retryable": true });
        for attempt in [1, 2] {
            let err = run(attempt, input.clone()).await.unwrap_err();
            assert_eq!(err.code, INJECTED_FAILURE);
            assert!(err.retryable);
            assert_eq!(err.details, json!({ "attempt": attempt, "fail_attempts": 2 }));
        }
        assert_eq!(run(3, input).await.unwrap(), json!({ "attempt": 3 }));
    }

    #[tokio::test]
    async fn the_retryable_flag_decides_the_class() {
        let err = run(1, json!({ "fail_attempts": 1, "retryable": false })).await.unwrap_err();
        assert!(!err.retryable);
        let err = run(1, json!({ "fail_attempts": 1 })).await.unwrap_err();
        assert!(err.retryable, "retryable defaults to true");
    }

    #[tokio::test]
    async fn retry_after_seconds_is_carried_in_the_details_within_its_bound() {
        let err = run(1, json!({ "fail_attempts": 1, "retry_after_seconds": 86400 })).await.unwrap_err();
        assert_eq!(err.details["retry_after_seconds"], json!(86400.0));
        for bad in [json!(-1), json!(86401), json!(1e300)] {
            let err = run(1, json!({ "fail_attempts": 1, "retry_after_seconds": bad })).await.unwrap_err();
            assert_eq!(err.code, codes::INVALID_INPUT, "{bad}");
        }
    }

    #[tokio::test]
    async fn zero_fail_attempts_succeeds_at_once() {
        assert_eq!(run(1, json!({ "fail_attempts": 0 })).await.unwrap(), json!({ "attempt": 1 }));
    }

    #[tokio::test]
    async fn a_negative_count_or_unknown_field_is_invalid_input() {
        for input in [json!({ "fail_attempts": -1 }), json!({ "fail_attempts": 1, "retry": true })] {
            let err = run(1, input.clone()).await.unwrap_err();
            assert_eq!(err.code, codes::INVALID_INPUT, "{input}");
            assert!(!err.retryable);
        }
    }
}
