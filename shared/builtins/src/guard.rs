//! Races an execution against its cancellation signal and its deadline, so that every
//! executor stops the same way: dropping the work future stops the work (a sleep, a request).

use std::future::Future;

use rara_domain::StepError;
use rara_domain::executor::ExecutionContext;
use rara_domain::step_error::codes;

/// Runs `work` until it finishes, `ctx.cancel` fires (permanent `CANCELLED`) or
/// `ctx.deadline` passes (retryable `DEADLINE_EXCEEDED`). Work that is ready wins a tie.
pub(crate) async fn guard<T>(
    ctx: &ExecutionContext,
    work: impl Future<Output = Result<T, StepError>>,
) -> Result<T, StepError> {
    tokio::select! {
        biased;
        () = ctx.cancel.cancelled() => Err(cancelled(&ctx.operation)),
        result = work => result,
        () = tokio::time::sleep_until(ctx.deadline) => Err(deadline_exceeded(&ctx.operation)),
    }
}

pub(crate) fn cancelled(operation: &str) -> StepError {
    StepError::permanent(codes::CANCELLED, format!("{operation}: cancelled"))
}

pub(crate) fn deadline_exceeded(operation: &str) -> StepError {
    StepError::retryable(codes::DEADLINE_EXCEEDED, format!("{operation}: the execution deadline passed"))
}

/// The reporter said the lease is gone: stop and write nothing more. The error is retryable
/// because the step itself did not fail; the fenced store drops it anyway.
pub(crate) fn lease_lost(operation: &str) -> StepError {
    StepError::retryable(codes::CANCELLED, format!("{operation}: stopped because the lease was lost"))
        .with_details(serde_json::json!({ "reason": "lease_lost" }))
}
