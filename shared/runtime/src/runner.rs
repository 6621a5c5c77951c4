//! The local executor runner: polls SQS and drives [`BatchExecutor`] exactly as Lambda's
//! SQS event source does: receive a batch, process it, delete the messages that did not
//! come back, leave the rest to return after their visibility.

use std::sync::Arc;
use std::time::Duration;

use rara_queue::Queue;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::batch::{BatchExecutor, Record};
use crate::metrics::Counters;

/// The pause after a failed receive before the next one.
const RECEIVE_RETRY_PAUSE: Duration = Duration::from_secs(1);

/// How the runner polls.
#[derive(Debug, Clone)]
pub struct RunnerOptions {
    /// Messages per batch (1–10).
    pub batch_size: u32,
    /// Long-poll wait per receive.
    pub wait: Duration,
    /// The time one batch may take, like a function timeout (minus `margin`).
    pub batch_timeout: Duration,
    pub margin: Duration,
    /// Exit once receives have found nothing for this long (`None`: run until stopped).
    pub until_idle: Option<Duration>,
}

/// Runs batches until `stop` fires (the current receive and batch are finished first) or
/// the queue stays idle. Returns the summed counters.
pub async fn run_executor(
    executor: &BatchExecutor,
    queue: Arc<dyn Queue>,
    options: &RunnerOptions,
    stop: CancellationToken,
) -> Result<Counters, rara_queue::Error> {
    let mut total = Counters::default();
    let mut idle_since = Instant::now();
    while !stop.is_cancelled() {
        // A receive is never abandoned midway: messages it got would stay invisible for
        // the visibility timeout. It ends within `wait`, and what it got is processed.
        let received = match queue.receive(options.batch_size, options.wait).await {
            Ok(received) => received,
            Err(e) => {
                tracing::warn!(error = %e, "receive failed; trying again shortly");
                tokio::time::sleep(RECEIVE_RETRY_PAUSE).await;
                continue;
            }
        };
        if received.is_empty() {
            if options.until_idle.is_some_and(|idle| idle_since.elapsed() >= idle) {
                break;
            }
            continue;
        }
        let receipts: Vec<(String, String)> =
            received.iter().map(|m| (m.message_id.clone(), m.receipt_handle.clone())).collect();
        let records = received
            .into_iter()
            .map(|m| Record {
                message_id: m.message_id,
                receipt_handle: m.receipt_handle,
                body: m.body,
                traceparent: m.traceparent,
            })
            .collect();
        let deadline = Instant::now() + options.batch_timeout.saturating_sub(options.margin);
        let report = executor.process(records, deadline).await;
        let done: Vec<String> =
            receipts.into_iter().filter(|(id, _)| !report.returned.contains(id)).map(|(_, receipt)| receipt).collect();
        if !done.is_empty() {
            let undeleted = queue.delete(&done).await?;
            if !undeleted.is_empty() {
                tracing::warn!(
                    count = undeleted.len(),
                    "some processed messages could not be deleted; they will be stale when they return"
                );
            }
        }
        total += report.counters;
        idle_since = Instant::now();
    }
    Ok(total)
}
