//! The queue port: what the scheduler and the executor need from SQS, behind a trait so
//! the handlers are tested against the real adapter and benchmarked against other
//! implementations with the same semantics.

use std::time::Duration;

pub use crate::error::Error;

/// A message to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// Unique within one batch; returned for the entries that failed.
    pub id: String,
    pub body: String,
    /// W3C `traceparent`, carried as a message attribute.
    pub traceparent: Option<String>,
    /// The operations of the message's steps ([`crate::operations`]), carried as a message
    /// attribute; `None`: not said.
    pub operations: Option<String>,
    /// Hidden this long after the send (SQS `DelaySeconds`, rounded up to a second, at most
    /// [`MAX_SEND_DELAY`]); zero: visible at once.
    pub delay: Duration,
}

impl Outgoing {
    /// A message with this id (unique within its batch) and body, no trace context, no
    /// operations said, no delay.
    pub fn new(id: impl Into<String>, body: impl Into<String>) -> Self {
        Outgoing { id: id.into(), body: body.into(), traceparent: None, operations: None, delay: Duration::ZERO }
    }
}

/// The longest delay SQS accepts on a send (15 minutes).
pub const MAX_SEND_DELAY: Duration = Duration::from_secs(15 * 60);

/// A received message (the local runner's view; Lambda hands the same fields in its event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub message_id: String,
    pub receipt_handle: String,
    pub body: String,
    pub receive_count: u32,
    pub traceparent: Option<String>,
    /// The `rara_operations` attribute as it came ([`crate::operations::decode`] reads it).
    pub operations: Option<String>,
}

/// The longest visibility SQS accepts (12 hours).
pub const MAX_VISIBILITY: Duration = Duration::from_secs(12 * 60 * 60);

#[async_trait::async_trait]
pub trait Queue: Send + Sync {
    /// Sends messages (any number; batched by 10, the batches concurrently). Returns the ids
    /// of entries that failed.
    async fn send(&self, messages: &[Outgoing]) -> Result<Vec<String>, Error>;
    /// Hides a received message for `timeout` from now (capped at 12 hours).
    async fn change_visibility(&self, receipt_handle: &str, timeout: Duration) -> Result<(), Error>;
    /// Receives up to `max` (≤ 10) messages, waiting up to `wait` for the first.
    async fn receive(&self, max: u32, wait: Duration) -> Result<Vec<Received>, Error>;
    /// Deletes received messages (batched by 10, the batches concurrently). Returns the
    /// receipt handles that could not be deleted; an error when a batch request failed.
    async fn delete(&self, receipt_handles: &[String]) -> Result<Vec<String>, Error>;
    /// Puts a body that cannot be processed on the dead-letter queue with its reason.
    async fn dead_letter(&self, body: &str, reason_code: &str, reason: &str) -> Result<(), Error>;
    /// Names the queue in logs (its URL for SQS; never credentials).
    fn peer(&self) -> String {
        "the queue".to_owned()
    }
}
