//! The scheduler Lambda's handler: one invocation reaps expired leases, then leases due
//! steps and sends their messages, polling until its time budget is spent (so a newly due
//! step waits seconds, not a minute, for the next schedule). It answers with its counters,
//! its spans exported before it returns.

use std::time::Duration;

use lambda_runtime::LambdaEvent;
use rara_platform::metrics::EmfLine;
use rara_runtime::invocation::{self, FunctionTimeout};
use rara_runtime::metrics::Counters;
use rara_runtime::scheduler::Scheduler;
use tokio_util::sync::CancellationToken;

/// Handles one scheduled event (its content does not matter). `budget` is the configured
/// polling time; it is cut to the invocation's remaining time minus `margin` (the runtime's
/// deadline, or [`FunctionTimeout::scheduler`] from now when that deadline is unusable:
/// [`invocation::remaining`]).
pub async fn handle(
    scheduler: &Scheduler,
    budget: Duration,
    margin: Duration,
    event: LambdaEvent<serde_json::Value>,
) -> Result<Counters, lambda_runtime::Error> {
    let remaining = invocation::remaining(event.context.deadline, FunctionTimeout::scheduler()).saturating_sub(margin);
    // No pass starts after the budget; a pass under way at the deadline gives up its sends
    // and releases their leases, so the invocation answers in time whatever SQS does.
    let deadline = tokio::time::Instant::now() + remaining;
    let counters = scheduler.run_until(Some(budget.min(remaining)), CancellationToken::new(), Some(deadline)).await?;
    println!("{}", counters.emf_line("scheduler"));
    tracing::info!(
        leased = counters.leased,
        sent = counters.sent,
        released = counters.released,
        reaped = counters.reaped,
        "scheduler invocation done"
    );
    // A returned invocation may be frozen before the exporter's interval: export now.
    rara_platform::telemetry::flush().await;
    Ok(counters)
}
