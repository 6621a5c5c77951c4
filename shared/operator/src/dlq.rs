//! The dead-letter queue as an operator acts on it (`rara dlq`, the console's `/dlq` page): the
//! port [`DeadLetters`] and what it answers. The adapter over SQS and the store is
//! `rara_platform::dlq`; the API holds the port, so it links no SQS SDK.

use serde::Serialize;

/// The fate of a DLQ entry, as `rara dlq list --json` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// rara refused it (its reason says why), or it is not a step message at all.
    Rejected,
    /// Its step moved on (finished, leased again, handed back): nothing needs it.
    Stale,
    /// Its step still waits for exactly this message: redrive it.
    Live,
    /// A step message for a step this database does not know.
    Unknown,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Rejected => "rejected",
            State::Stale => "stale",
            State::Live => "live",
            State::Unknown => "unknown",
        }
    }
}

/// One message on the DLQ, classified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    pub message_id: String,
    pub state: State,
    /// The sentence that explains the state.
    pub classification: String,
    /// rara's code and reason, for a dead-letter rara made itself.
    pub reason_code: Option<String>,
    pub reason: Option<String>,
    pub receive_count: u32,
    pub body: String,
}

/// What a purge of the stale entries did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Purged {
    pub purged: usize,
    pub kept: usize,
}

/// What a redrive did: the entries moved back, and those left on the DLQ by state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Redriven {
    pub redriven: usize,
    pub stale: usize,
    pub unknown: usize,
    pub rejected: usize,
}

impl Redriven {
    pub fn skipped(&self) -> usize {
        self.stale + self.unknown + self.rejected
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The queue could not be read or written (its SDK's error, kept as the source).
    #[error("the dead-letter queue is unavailable")]
    Queue(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error(transparent)]
    Store(#[from] rara_store::Error),
    /// Some messages could not be sent back to the step queue; they stay on the DLQ.
    #[error("{unsent} message(s) could not be sent back; they stay on the DLQ")]
    Unsent { unsent: usize, done: Redriven },
}

/// The DLQ and the step queue a redrive sends to. Reading receives the messages (hiding them a
/// moment) and makes each visible again unless the action deletes it; a redrive deletes from the
/// DLQ only what reached the step queue, so nothing is lost.
#[async_trait::async_trait]
pub trait DeadLetters: Send + Sync + std::fmt::Debug {
    /// Up to `limit` entries, classified, left on the DLQ.
    async fn list(&self, limit: u32) -> Result<Vec<Entry>, Error>;
    /// Deletes the stale entries among the first `limit`; the others stay.
    async fn purge_stale(&self, limit: u32) -> Result<Purged, Error>;
    /// Moves the live entries and rara's own dead-letters among the first `limit` back to the
    /// step queue; stale and unknown ones stay.
    async fn redrive(&self, limit: u32) -> Result<Redriven, Error>;
}
