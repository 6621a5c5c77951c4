//! rara's delivery channel. SQS only delivers: a message names a step and its lease, nothing
//! more; Postgres holds everything else.
//!
//! # Layout
//!
//! - [`error`]: [`Error`], a failed queue operation (the SDK's error kept as its source) and
//!   whether it is transient.
//! - [`message`]: the step message (format version, step ids, lease tokens; one step or
//!   several) and its strict parser, one file per format.
//! - [`operations`]: the attribute naming the operations of a message's steps, a hint the
//!   executor may use to leave out work.
//! - [`port`]: the [`Queue`] trait the scheduler and the executor use, and its value types.
//! - [`sqs`]: the SQS adapter (AWS SDK; `AWS_ENDPOINT_URL` points it at LocalStack).
//! - `memory` (feature `memory`): an in-memory queue with SQS semantics (visibility, receive counts,
//!   redrive to a DLQ), for benchmarks; `tests/contract.rs` holds it to the same suite
//!   as the SQS adapter.

pub mod error;
#[cfg(feature = "memory")]
pub mod memory;
pub mod message;
pub mod operations;
pub mod port;
pub mod sqs;

pub use error::Error;
#[cfg(feature = "memory")]
pub use memory::MemoryQueue;
pub use message::{MessageStep, StepMessage, encode_steps, parse_steps};
pub use port::{MAX_SEND_DELAY, Outgoing, Queue, Received};
