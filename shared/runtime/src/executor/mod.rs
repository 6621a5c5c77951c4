//! The executor: one SQS batch (or one local receive) of step messages claimed, run and
//! recorded, each message's fate a value.
//!
//! # Layout
//!
//! - [`batch`]: the [`BatchExecutor`]: parse, claim in one statement, run concurrently, record
//!   outcomes in micro-batches, move or bring back what must come back; its passes in
//!   `batch/` (`quick`, `map`, `references`, `record`, `trace`, ...).
//! - [`fate`]: a message's fate as a value: the [`BatchReport`] lists what was acknowledged
//!   (everything else comes back), the delivered [`Record`], and [`fate::judge`], the pure
//!   verdict on a finished execution.
//! - [`execution`]: one claimed step: routing, deadline, cancellation, heartbeats, panics,
//!   and parking a detachable remote attempt at the invocation's end.
//! - `end`: how an execution ends, decided in one place from the deadlines and the facts
//!   (never from which `select!` branch woke first), and parking.
//! - [`reporter`]: progress and artifacts written to Postgres, fenced and throttled, and the
//!   [`Loss`](reporter::Loss) that tells an execution its lease is gone.
//! - `returned`: an executor's output held to `RARA_MAX_OUTPUT_BYTES` before it is recorded.
//! - [`offload`]: outputs beyond `RARA_INLINE_OUTPUT_BYTES` written to the artifact store and
//!   recorded by reference; offloaded outputs read back for pointer references.
//! - [`cancel_watch`]: the holder's side of an operator's cancel: one listener per process,
//!   relayed to every running execution's heartbeat.

pub mod batch;
pub mod cancel_watch;
mod end;
pub mod execution;
pub mod fate;
pub mod offload;
pub mod reporter;
mod returned;

pub use batch::BatchExecutor;
pub use fate::{BatchReport, Record};
