//! `rara executor`: the executor Lambda's batch handler, driven locally by polling SQS
//! (`AWS_ENDPOINT_URL` for LocalStack). Ctrl-C or SIGTERM stops taking work; what is held
//! is finished first, then the process exits cleanly.

use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use rara_platform::runner::{RunnerOptions, run_executor};
use rara_platform::wiring::Wiring;
use rara_queue::Queue;

use crate::Failure;

/// Run the executor locally: poll SQS and drive the Lambda's batch handler
/// (delete what succeeded, leave what must come back).
#[derive(Debug, Args)]
pub struct Executor {
    /// Exit once the queue has stayed empty for --idle-seconds.
    #[arg(long)]
    until_idle: bool,
    #[arg(long, default_value_t = 5)]
    idle_seconds: u64,
    /// Messages per batch, like the event source's BatchSize (above 10, gathered from
    /// several receives within --batching-window-ms).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    batch_size: u32,
    /// How long to keep gathering a batch after its first message, like the event
    /// source's MaximumBatchingWindowInSeconds.
    #[arg(long, default_value_t = 0)]
    batching_window_ms: u64,
}

pub async fn run(args: Executor, json: bool) -> Result<(), Failure> {
    rara_platform::wiring::init_logging("rara-executor")?;
    let until_idle = args.until_idle.then(|| Duration::from_secs(args.idle_seconds));
    let wiring = Wiring::from_env("executor").await?;
    wiring.settings.require_dlq()?;
    let executor = wiring.batch_executor().await?;
    let options = RunnerOptions {
        batch_size: args.batch_size,
        batching_window: Duration::from_millis(args.batching_window_ms),
        wait: Duration::from_secs(if until_idle.is_some() { 1 } else { 10 }),
        batch_timeout: wiring.settings.core.function_timeout,
        margin: wiring.settings.deadline_margin,
        until_idle,
    };
    let queue: Arc<dyn Queue> = wiring.queue.clone();
    let counters = run_executor(&executor, queue, &options, super::stop_on_signal()).await?;
    super::summary("executor", &counters, json);
    rara_platform::telemetry::flush().await;
    Ok(())
}
