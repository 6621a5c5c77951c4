//! The local executor runner: polls SQS and drives [`BatchExecutor`] exactly as Lambda's
//! SQS event source does: receive a batch, process it, delete the messages it acknowledged,
//! leave the rest to return after their visibility.

use std::sync::Arc;
use std::time::Duration;

use rara_queue::{Queue, Received};
use rara_runtime::burst::Burst;
use rara_runtime::executor::{BatchExecutor, Record};
use rara_runtime::interrupt::after_interrupt;
use rara_runtime::metrics::Counters;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

/// The pause after a failed receive before the next one.
const RECEIVE_RETRY_PAUSE: Duration = Duration::from_secs(1);
/// What one receive may return (SQS's limit).
const RECEIVE_MAX: u32 = 10;

/// How the runner polls.
#[derive(Debug, Clone)]
pub struct RunnerOptions {
    /// Messages per batch. Above 10 (one receive's limit) a batch is gathered from several
    /// receives within `batching_window`, like the event source's `BatchSize` and
    /// `MaximumBatchingWindowInSeconds`.
    pub batch_size: u32,
    /// How long to keep gathering a batch after its first message (zero: one receive).
    pub batching_window: Duration,
    /// Long-poll wait per receive.
    pub wait: Duration,
    /// The time one batch may take, like a function timeout (minus `margin`).
    pub batch_timeout: Duration,
    pub margin: Duration,
    /// Exit once receives have found nothing for this long (`None`: run until stopped).
    pub until_idle: Option<Duration>,
}

/// Runs batches until `stop` fires or the queue stays idle. Returns the summed counters.
///
/// Stopping is bounded: once `stop` fires no new receive starts; the receive and the batch
/// under way get the executor's shutdown grace (`RARA_SHUTDOWN_GRACE_SECONDS`); then the
/// executions still running are interrupted and their steps given back (fenced), and the
/// last calls to the queue get [`LAST_CALL_BOUND`](rara_runtime::interrupt::LAST_CALL_BOUND) — a silent SQS peer cannot
/// hold the runner. Queue errors are transient: logged, and the loop goes on.
pub async fn run_executor(
    executor: &BatchExecutor,
    queue: Arc<dyn Queue>,
    options: &RunnerOptions,
    stop: CancellationToken,
) -> Result<Counters, rara_queue::Error> {
    let interrupt = CancellationToken::new();
    let executor = executor.clone().with_interrupt(interrupt.clone());
    let grace = executor.shutdown_grace();
    let _timer = AbortOnDropHandle::new(tokio::spawn({
        let (stop, interrupt) = (stop.clone(), interrupt.clone());
        async move {
            stop.cancelled().await;
            tokio::time::sleep(grace).await;
            interrupt.cancel();
        }
    }));
    let mut total = Counters::default();
    let mut idle_since = Instant::now();
    let mut receives = Burst::new("receive", queue.peer());
    while !stop.is_cancelled() {
        // A receive is not abandoned lightly (messages it got would stay invisible for the
        // visibility timeout): it ends within `wait` and what it got is processed. Only a
        // receive still hanging when the grace is over is given up.
        let received = match after_interrupt(&interrupt, receive_batch(queue.as_ref(), options)).await {
            Some(Ok(received)) => {
                receives.succeeded();
                received
            }
            Some(Err(e)) => {
                receives.failed(&e);
                tokio::select! {
                    _ = tokio::time::sleep(RECEIVE_RETRY_PAUSE) => {}
                    _ = stop.cancelled() => {}
                }
                continue;
            }
            None => {
                tracing::warn!("gave up a receive that did not answer within the shutdown grace");
                break;
            }
        };
        if received.is_empty() {
            if options.until_idle.is_some_and(|idle| idle_since.elapsed() >= idle) {
                break;
            }
            continue;
        }
        total += process(&executor, queue.as_ref(), &interrupt, received, options).await;
        idle_since = Instant::now();
    }
    Ok(total)
}

/// Processes one received batch and deletes the messages it acknowledged (everything else
/// comes back after its visibility). Returns the batch's counters.
async fn process(
    executor: &BatchExecutor,
    queue: &dyn Queue,
    interrupt: &CancellationToken,
    received: Vec<Received>,
    options: &RunnerOptions,
) -> Counters {
    let receipts: Vec<(String, String)> =
        received.iter().map(|m| (m.message_id.clone(), m.receipt_handle.clone())).collect();
    let records = received.into_iter().map(Record::from).collect();
    let deadline = Instant::now() + options.batch_timeout.saturating_sub(options.margin);
    let report = executor.process(records, deadline).await;
    // Only what the batch acknowledged is deleted; everything else comes back.
    let done: Vec<String> =
        receipts.into_iter().filter(|(id, _)| report.is_acknowledged(id)).map(|(_, receipt)| receipt).collect();
    if !done.is_empty() {
        match after_interrupt(interrupt, queue.delete(&done)).await {
            Some(Ok(undeleted)) if undeleted.is_empty() => {}
            Some(Ok(undeleted)) => tracing::warn!(
                count = undeleted.len(),
                "some processed messages could not be deleted; they will be stale when they return"
            ),
            Some(Err(e)) => {
                tracing::warn!(error = %e, "deleting processed messages failed; they will be stale when they return")
            }
            None => {
                tracing::warn!("gave up deleting processed messages (stopping); they will be stale when they return")
            }
        }
    }
    report.counters
}

/// One batch: a receive (waiting up to `wait` for the first message), then more receives
/// until `batch_size` messages or the end of the batching window. A failed later receive
/// ends the gathering; what was received is processed, never dropped.
async fn receive_batch(queue: &dyn Queue, options: &RunnerOptions) -> Result<Vec<Received>, rara_queue::Error> {
    let mut got = queue.receive(options.batch_size.min(RECEIVE_MAX), options.wait).await?;
    if got.is_empty() || options.batching_window.is_zero() {
        return Ok(got);
    }
    let end = Instant::now() + options.batching_window;
    while (got.len() as u32) < options.batch_size {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match queue.receive((options.batch_size - got.len() as u32).min(RECEIVE_MAX), left).await {
            Ok(more) if more.is_empty() => break,
            Ok(more) => got.extend(more),
            Err(e) => {
                tracing::warn!(error = %e, "a receive while gathering a batch failed; processing what arrived");
                break;
            }
        }
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rara_queue::{MemoryQueue, Outgoing};

    fn options(batch_size: u32, batching_window: Duration) -> RunnerOptions {
        RunnerOptions {
            batch_size,
            batching_window,
            wait: Duration::from_millis(100),
            batch_timeout: Duration::from_secs(10),
            margin: Duration::from_secs(1),
            until_idle: None,
        }
    }

    async fn queue_with(n: usize) -> MemoryQueue {
        let queue = MemoryQueue::new(Duration::from_secs(30), 5);
        let messages: Vec<Outgoing> = (0..n).map(|i| Outgoing::new(i.to_string(), format!("m{i}"))).collect();
        for chunk in messages.chunks(10) {
            assert!(queue.send(chunk).await.unwrap().is_empty());
        }
        queue
    }

    #[tokio::test]
    async fn a_batch_above_ten_is_gathered_from_several_receives_within_the_window() {
        let queue = queue_with(25).await;
        let batch = receive_batch(&queue, &options(100, Duration::from_millis(200))).await.unwrap();
        assert_eq!(batch.len(), 25, "everything queued, gathered into one batch");
        let queue = queue_with(25).await;
        assert_eq!(receive_batch(&queue, &options(20, Duration::from_millis(200))).await.unwrap().len(), 20);
    }

    #[tokio::test]
    async fn without_a_window_a_batch_is_one_receive() {
        let queue = queue_with(25).await;
        assert_eq!(receive_batch(&queue, &options(100, Duration::ZERO)).await.unwrap().len(), 10);
        let empty = queue_with(0).await;
        assert!(receive_batch(&empty, &options(100, Duration::from_millis(50))).await.unwrap().is_empty());
    }
}
