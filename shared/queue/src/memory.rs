//! An in-memory queue with SQS standard-queue semantics, for benchmarks and tests: batches
//! of at most 10, a visibility timeout per receive, receive counts, a receipt handle that
//! changes with every receive, `ChangeMessageVisibility`, and redrive to an in-memory
//! dead-letter queue once a message would be received more than `max_receive_count` times.
//!
//! Every call is O(batch · log depth): visible messages wait in a FIFO, received ones in a
//! min-heap by the moment they become visible again (entries made stale by a delete or a
//! visibility change are skipped lazily, recognised by their generation number).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::Error;
use crate::port::{MAX_VISIBILITY, Outgoing, Queue, Received};

/// The most messages one receive returns (as SQS).
pub const MAX_BATCH: usize = 10;

/// A message moved to the dead-letter queue: by redrive (no reason) or by
/// [`Queue::dead_letter`] (with the reason code and text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub body: String,
    pub reason_code: Option<String>,
    pub reason: Option<String>,
}

#[derive(Debug)]
struct Message {
    id: String,
    body: String,
    traceparent: Option<String>,
    operations: Option<String>,
    receive_count: u32,
    /// Bumped by every receive: a receipt handle of another generation is outdated.
    receipt_generation: u64,
    /// Bumped by every receive and visibility change: a heap entry of another one is stale.
    heap_generation: u64,
    /// Received and not visible again yet.
    in_flight: bool,
}

#[derive(Debug, Default)]
struct State {
    next_seq: u64,
    messages: HashMap<u64, Message>,
    visible: VecDeque<u64>,
    /// (visible again at, seq, generation).
    invisible: BinaryHeap<Reverse<(Instant, u64, u64)>>,
    dlq: Vec<DeadLetter>,
}

impl State {
    /// Moves every message whose visibility ended back to the visible FIFO.
    fn promote(&mut self, now: Instant) {
        while let Some(Reverse((at, seq, generation))) = self.invisible.peek().copied() {
            if at > now {
                break;
            }
            self.invisible.pop();
            if let Some(m) = self.messages.get_mut(&seq).filter(|m| m.in_flight && m.heap_generation == generation) {
                m.in_flight = false;
                self.visible.push_back(seq);
            }
        }
    }

    /// Drops the heap entries of messages deleted (or received again) since, once they
    /// outnumber the live ones: otherwise a busy queue keeps one entry per deleted message
    /// for a whole visibility timeout. Amortized O(1) per delete.
    fn prune_invisible(&mut self) {
        if self.invisible.len() <= 2 * self.messages.len() + 1024 {
            return;
        }
        let messages = &self.messages;
        self.invisible.retain(|Reverse((_, seq, generation))| {
            messages.get(seq).is_some_and(|m| m.in_flight && m.heap_generation == *generation)
        });
    }

    /// When the earliest invisible message returns (possibly a stale entry: a spurious wake-up).
    fn next_return(&self) -> Option<Instant> {
        self.invisible.peek().map(|Reverse((at, _, _))| *at)
    }
}

/// An in-memory queue with its dead-letter queue. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct MemoryQueue {
    state: Mutex<State>,
    arrived: Notify,
    visibility: Duration,
    max_receive_count: u32,
}

fn receipt(seq: u64, generation: u64) -> String {
    format!("{seq:x}.{generation:x}")
}

fn parse_receipt(receipt: &str) -> Option<(u64, u64)> {
    let (seq, generation) = receipt.split_once('.')?;
    Some((u64::from_str_radix(seq, 16).ok()?, u64::from_str_radix(generation, 16).ok()?))
}

impl MemoryQueue {
    /// A queue whose messages stay hidden for `visibility` after each receive and move to
    /// the DLQ when they would be received more than `max_receive_count` times.
    pub fn new(visibility: Duration, max_receive_count: u32) -> Self {
        MemoryQueue {
            state: Mutex::new(State::default()),
            arrived: Notify::new(),
            visibility: visibility.min(MAX_VISIBILITY),
            max_receive_count: max_receive_count.max(1),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the state half-changed in a way that
        // matters more than losing the queue: keep serving.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Messages on the queue (visible or in flight), like `ApproximateNumberOfMessages` +
    /// `ApproximateNumberOfMessagesNotVisible`.
    pub fn depth(&self) -> usize {
        self.state().messages.len()
    }

    /// Messages that can be received right now.
    pub fn visible(&self) -> usize {
        let mut state = self.state();
        state.promote(Instant::now());
        state.visible.len()
    }

    /// A copy of the dead-letter queue, oldest first.
    pub fn dead_letters(&self) -> Vec<DeadLetter> {
        self.state().dlq.clone()
    }

    /// Takes up to `max` visible messages, redriving the ones over the receive limit.
    fn take(&self, max: usize) -> Vec<Received> {
        let now = Instant::now();
        let mut state = self.state();
        state.promote(now);
        let mut out = Vec::with_capacity(max.min(state.visible.len()));
        let visible_again = now + self.visibility;
        while out.len() < max {
            let Some(seq) = state.visible.pop_front() else { break };
            let Some(message) = state.messages.get_mut(&seq) else { continue };
            if message.receive_count >= self.max_receive_count {
                if let Some(m) = state.messages.remove(&seq) {
                    state.dlq.push(DeadLetter { body: m.body, reason_code: None, reason: None });
                }
                continue;
            }
            message.receive_count += 1;
            message.receipt_generation += 1;
            message.heap_generation += 1;
            message.in_flight = true;
            let received = Received {
                message_id: message.id.clone(),
                receipt_handle: receipt(seq, message.receipt_generation),
                body: message.body.clone(),
                receive_count: message.receive_count,
                traceparent: message.traceparent.clone(),
                operations: message.operations.clone(),
            };
            let generation = message.heap_generation;
            state.invisible.push(Reverse((visible_again, seq, generation)));
            out.push(received);
        }
        out
    }
}

#[async_trait::async_trait]
impl Queue for MemoryQueue {
    async fn send(&self, messages: &[Outgoing]) -> Result<Vec<String>, Error> {
        {
            let mut state = self.state();
            let now = Instant::now();
            for m in messages {
                let seq = state.next_seq;
                state.next_seq += 1;
                let delayed = !m.delay.is_zero();
                state.messages.insert(
                    seq,
                    Message {
                        id: format!("mem-{seq:x}"),
                        body: m.body.clone(),
                        traceparent: m.traceparent.clone(),
                        operations: m.operations.clone(),
                        receive_count: 0,
                        receipt_generation: 0,
                        heap_generation: 0,
                        // A delayed message waits in the heap like one whose visibility ends.
                        in_flight: delayed,
                    },
                );
                if delayed {
                    let at = now + m.delay.min(crate::port::MAX_SEND_DELAY);
                    state.invisible.push(Reverse((at, seq, 0)));
                } else {
                    state.visible.push_back(seq);
                }
            }
        }
        self.arrived.notify_waiters();
        Ok(Vec::new())
    }

    async fn change_visibility(&self, receipt_handle: &str, timeout: Duration) -> Result<(), Error> {
        let invalid = || {
            Error::sqs(
                "ChangeMessageVisibility",
                "the receipt handle is not valid (deleted, received again since, or not in flight)",
            )
        };
        let (seq, generation) = parse_receipt(receipt_handle).ok_or_else(invalid)?;
        let at = Instant::now() + timeout.min(MAX_VISIBILITY);
        {
            let mut state = self.state();
            let message = state
                .messages
                .get_mut(&seq)
                .filter(|m| m.in_flight && m.receipt_generation == generation)
                .ok_or_else(invalid)?;
            // The receipt handle stays valid (as in SQS); the old heap entry becomes stale.
            message.heap_generation += 1;
            let entry = Reverse((at, seq, message.heap_generation));
            state.invisible.push(entry);
        }
        if timeout.is_zero() {
            self.arrived.notify_waiters();
        }
        Ok(())
    }

    async fn receive(&self, max: u32, wait: Duration) -> Result<Vec<Received>, Error> {
        let max = (max as usize).clamp(1, MAX_BATCH);
        let end = Instant::now() + wait;
        loop {
            // Register interest before looking, so a send between the look and the wait wakes us.
            let arrived = self.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            let got = self.take(max);
            let now = Instant::now();
            if !got.is_empty() || now >= end {
                return Ok(got);
            }
            let wake = self.state().next_return().map_or(end, |at| at.min(end));
            tokio::select! {
                _ = &mut arrived => {}
                _ = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    async fn delete(&self, receipt_handles: &[String]) -> Result<Vec<String>, Error> {
        let mut state = self.state();
        let mut failed = Vec::new();
        for handle in receipt_handles {
            match parse_receipt(handle) {
                // SQS accepts a delete with an outdated receipt handle of a message received
                // again since, without deleting it; a current handle deletes the message.
                Some((seq, generation)) => {
                    if state.messages.get(&seq).is_some_and(|m| m.receipt_generation == generation) {
                        state.messages.remove(&seq);
                    }
                }
                None => failed.push(handle.clone()),
            }
        }
        state.prune_invisible();
        Ok(failed)
    }

    async fn dead_letter(&self, body: &str, reason_code: &str, reason: &str) -> Result<(), Error> {
        self.state().dlq.push(DeadLetter {
            body: if body.is_empty() { "<empty>".into() } else { body.to_owned() },
            reason_code: Some(reason_code.to_owned()),
            reason: Some(reason.to_owned()),
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn deleted_messages_do_not_pile_up_until_their_visibility_would_end() {
        let queue = MemoryQueue::new(Duration::from_secs(360), 5);
        for round in 0..500 {
            let batch: Vec<Outgoing> = (0..10).map(|i| Outgoing::new(i.to_string(), format!("{round}-{i}"))).collect();
            queue.send(&batch).await.unwrap();
            let received = queue.receive(10, Duration::ZERO).await.unwrap();
            let handles: Vec<String> = received.into_iter().map(|m| m.receipt_handle).collect();
            assert!(queue.delete(&handles).await.unwrap().is_empty());
        }
        let state = queue.state();
        assert!(state.messages.is_empty());
        assert!(state.invisible.len() <= 1024 + 10, "{} stale heap entries kept", state.invisible.len());
    }
}
