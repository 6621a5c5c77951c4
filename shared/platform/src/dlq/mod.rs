//! The dead-letter queue over SQS and the store: `rara_operator::dlq::DeadLetters` as `rara dlq`
//! and `rara ui`'s `/dlq` page use it. Every entry is classified ([`classify`]): rara's own
//! dead-letters keep their reason; a message SQS moved there (its receive count reached
//! `maxReceiveCount`) is looked up in the store, so an operator can tell the messages a step
//! still waits for (`live`) from those whose step moved on (`stale`).

pub mod classify;

use std::collections::HashMap;
use std::time::Duration;

use rara_operator::dlq::{DeadLetters, Entry, Error, Purged, Redriven, State};
use rara_queue::sqs::{DLQ_REASON, DLQ_REASON_CODE, SqsQueue};
use rara_queue::{Outgoing, Queue, Received};
use rara_store::Store;

use classify::Classification;

/// The DLQ (`RARA_DLQ_URL`), the step queue a redrive sends to (`RARA_QUEUE_URL`), and the store
/// the entries' steps are looked up in.
#[derive(Debug, Clone)]
pub struct SqsDeadLetters {
    pub dlq: SqsQueue,
    pub queue: SqsQueue,
    pub store: Store,
}

/// One message on the DLQ, received (so hidden until released or deleted), classified.
struct Letter {
    message: Received,
    attributes: HashMap<String, String>,
    class: Classification,
}

impl Letter {
    fn entry(&self) -> Entry {
        Entry {
            message_id: self.message.message_id.clone(),
            state: self.class.state,
            classification: self.class.why.clone(),
            reason_code: self.attributes.get(DLQ_REASON_CODE).cloned(),
            reason: self.attributes.get(DLQ_REASON).cloned(),
            receive_count: self.message.receive_count,
            body: self.message.body.clone(),
        }
    }
}

fn queue(e: rara_queue::Error) -> Error {
    Error::Queue(Box::new(e))
}

impl SqsDeadLetters {
    /// The DLQ and step queue of `RARA_DLQ_URL` and `RARA_QUEUE_URL`, when both are set, with
    /// an SQS client from the SDK's standard environment; else `None` (no client is made).
    pub async fn from_env(store: Store) -> Option<SqsDeadLetters> {
        let var = |name| std::env::var(name).ok().filter(|v: &String| !v.trim().is_empty());
        let (dlq, queue) = (var("RARA_DLQ_URL")?, var("RARA_QUEUE_URL")?);
        let client = crate::aws::sqs_client_from_env().await;
        Some(SqsDeadLetters {
            dlq: SqsQueue::new(client.clone(), dlq, None),
            queue: SqsQueue::new(client, queue, None),
            store,
        })
    }
}

#[async_trait::async_trait]
impl DeadLetters for SqsDeadLetters {
    async fn list(&self, limit: u32) -> Result<Vec<Entry>, Error> {
        let letters = self.peek(limit).await?;
        self.release(&letters.iter().collect::<Vec<_>>()).await;
        Ok(letters.iter().map(Letter::entry).collect())
    }

    async fn purge_stale(&self, limit: u32) -> Result<Purged, Error> {
        let entries = self.peek(limit).await?;
        let (stale, keep): (Vec<&Letter>, Vec<&Letter>) = entries.iter().partition(|e| e.class.state == State::Stale);
        self.release(&keep).await;
        let purged = self.delete(&stale).await?;
        Ok(Purged { purged, kept: keep.len() })
    }

    async fn redrive(&self, limit: u32) -> Result<Redriven, Error> {
        let entries = self.peek(limit).await?;
        let (send, skip): (Vec<&Letter>, Vec<&Letter>) =
            entries.iter().partition(|e| e.class.state == State::Live || e.class.own);
        self.release(&skip).await;
        let outgoing: Vec<Outgoing> = send
            .iter()
            .enumerate()
            .map(|(i, e)| Outgoing {
                id: i.to_string(),
                body: e.message.body.clone(),
                traceparent: e.message.traceparent.clone(),
                operations: e.message.operations.clone(),
                delay: Duration::ZERO,
            })
            .collect();
        let failed = self.queue.send(&outgoing).await.map_err(queue)?;
        // Delete from the DLQ only what reached the step queue: nothing is lost.
        let reached = |reached: bool| -> Vec<&Letter> {
            send.iter().zip(&outgoing).filter(|(_, o)| failed.contains(&o.id) != reached).map(|(e, _)| *e).collect()
        };
        let (sent, unsent) = (reached(true), reached(false));
        self.release(&unsent).await;
        let skipped = |state: State| skip.iter().filter(|e| e.class.state == state).count();
        let done = Redriven {
            redriven: self.delete(&sent).await?,
            stale: skipped(State::Stale),
            unknown: skipped(State::Unknown),
            rejected: skipped(State::Rejected),
        };
        if !unsent.is_empty() {
            return Err(Error::Unsent { unsent: unsent.len(), done });
        }
        Ok(done)
    }
}

impl SqsDeadLetters {
    /// Receives up to `limit` DLQ messages, a page at a time, and classifies each page with one
    /// store read (when the page holds step messages to look up).
    async fn peek(&self, limit: u32) -> Result<Vec<Letter>, Error> {
        let mut entries: Vec<Letter> = Vec::new();
        while (entries.len() as u32) < limit {
            let wanted = (limit - entries.len() as u32).min(10);
            let batch = self.dlq.receive_with_attributes(wanted, Duration::from_secs(1)).await.map_err(queue)?;
            // A message seen again (its visibility ran out while we read) ends the pass.
            let fresh: Vec<_> = batch
                .into_iter()
                .filter(|(m, _)| !entries.iter().any(|e| e.message.message_id == m.message_id))
                .collect();
            if fresh.is_empty() {
                break;
            }
            let ids: Vec<_> = fresh.iter().flat_map(|(m, a)| classify::steps_to_look_up(&m.body, a)).collect();
            let mut steps = HashMap::new();
            if !ids.is_empty() {
                steps.extend(self.store.dlq_steps(&ids).await?.into_iter().map(|s| (s.id, s)));
            }
            for (message, attributes) in fresh {
                let class = classify::classify(&message.body, &attributes, &steps);
                entries.push(Letter { message, attributes, class });
            }
        }
        Ok(entries)
    }

    /// Makes the entries visible on the DLQ again: peeking must not hide them.
    async fn release(&self, entries: &[&Letter]) {
        for entry in entries {
            let _ = self.dlq.change_visibility(&entry.message.receipt_handle, Duration::ZERO).await;
        }
    }

    /// Deletes the entries from the DLQ; returns how many went.
    async fn delete(&self, entries: &[&Letter]) -> Result<usize, Error> {
        let receipts: Vec<String> = entries.iter().map(|e| e.message.receipt_handle.clone()).collect();
        let failed = self.dlq.delete(&receipts).await.map_err(queue)?;
        Ok(receipts.len() - failed.len())
    }
}
