//! What comes back: a message's visibility set to its wait, the steps of a message of several
//! moved into messages of their own, and what cannot be processed put on the dead-letter queue.

use std::time::Duration;

use tokio::time::Instant;

use super::BatchExecutor;
use crate::executor::fate::{Ack, BatchReport, Record};
use crate::interrupt::after_interrupt;

impl BatchExecutor {
    /// Sets the message's visibility so that it comes back after `wait` (if that fails it
    /// comes back after the queue's visibility timeout and the claim tells it to wait again).
    /// It is not acknowledged. A step of a message of several is moved into a message of its
    /// own when the batch ends ([`move_steps`](Self::move_steps)); past SQS's longest delay its
    /// message is hidden once, when the batch ends, until the soonest instant its steps asked for.
    pub(super) async fn come_back(&self, record: &Record, wait: Duration, report: &mut BatchReport) {
        if !report.is_packed(&record.message_id) {
            self.set_visibility(&record.receipt_handle, wait).await;
        } else if wait <= rara_queue::MAX_SEND_DELAY {
            report.move_at(record, Instant::now() + wait);
        } else {
            report.come_back_at(&record.message_id, &record.receipt_handle, Instant::now() + wait);
        }
    }

    /// Sends each step of a message of several that must come back in a message of its own,
    /// hidden until its instant (one `SendMessageBatch` per ten), and acknowledges it: its
    /// siblings' message is then deleted once they settle, and never returns for them nor
    /// counts a receive per sibling's retry. A step whose send failed brings its message back
    /// instead.
    pub(super) async fn move_steps(&self, report: &mut BatchReport) {
        let moves = report.take_moves();
        if moves.is_empty() {
            return;
        }
        let now = Instant::now();
        let outgoing: Vec<rara_queue::Outgoing> = moves
            .iter()
            .enumerate()
            .map(|(i, (record, at))| rara_queue::Outgoing {
                id: i.to_string(),
                body: record.body.clone(),
                traceparent: record.traceparent.clone(),
                operations: record.operations.clone(),
                delay: at.saturating_duration_since(now),
            })
            .collect();
        let failed: Vec<String> = match after_interrupt(&self.env.interrupt, self.env.queue.send(&outgoing)).await {
            Some(Ok(failed)) => failed,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "could not move steps into messages of their own; their messages come back");
                outgoing.iter().map(|o| o.id.clone()).collect()
            }
            None => outgoing.iter().map(|o| o.id.clone()).collect(),
        };
        for (o, (record, at)) in outgoing.iter().zip(moves) {
            if failed.contains(&o.id) {
                report.come_back_at(&record.message_id, &record.receipt_handle, at);
            } else {
                report.counters.moved += 1;
                report.counters.messages += 1;
                report.acknowledge(record.message_id, Ack::Moved);
            }
        }
    }

    pub(super) async fn set_visibility(&self, receipt_handle: &str, wait: Duration) {
        let change = self.env.queue.change_visibility(receipt_handle, wait);
        match after_interrupt(&self.env.interrupt, change).await {
            Some(Ok(())) => {}
            Some(Err(e)) => {
                tracing::warn!(error = %e, "could not set the message's visibility; it returns after the queue's timeout")
            }
            None => tracing::warn!(
                "gave up setting the message's visibility (stopping); it returns after the queue's timeout"
            ),
        }
    }

    pub(super) async fn dead_letter(&self, record: Record, code: &str, reason: &str, report: &mut BatchReport) {
        match self.env.queue.dead_letter(&record.body, code, reason).await {
            Ok(()) => {
                report.counters.dead_lettered += 1;
                tracing::warn!(message_id = %record.message_id, code, reason, "message moved to the dead-letter queue");
                report.acknowledge(record.message_id, Ack::DeadLettered { code: code.to_owned() });
            }
            Err(e) => {
                tracing::error!(error = %e, code, "could not move a bad message to the DLQ; it comes back (redrive takes it there)");
            }
        }
    }
}
