//! An operator's actions on runs and steps, as the HTTP API, the console and the CLI perform
//! them, without the runtime: the store's statements and the remote executors' `Cancel`.
//!
//! # Layout
//!
//! - [`cancel`]: cancel a run (every unfinished step) or one step, then tell every attempt that
//!   runs detached on a remote executor, concurrently, each within [`DETACHED_CANCEL_TIMEOUT`].
//! - [`bulk`]: the set-based actions over what a filter matches: retry the failed and cancelled
//!   steps, cancel the unfinished runs; one statement per batch, a bounded number per request.
//! - [`rerun`]: the registered version a rerun is made from, planned with its inputs.
//! - [`replay`]: one new run per finished run a filter matches (or a rerun from its first failed
//!   step), once per run.
//!
//! - [`inputs`]: submit a plan whose inputs, serialised, exceed the inline bound by reference:
//!   written to the artifact store first (`runs/{run}/inputs.json`), the run keeps
//!   `{"$stored": descriptor}`.
//!
//! - [`schedules`]: create a schedule (checked as its runs will be), trigger one run now, backfill
//!   a range of slots (bounded; the slots' keys make a second backfill add nothing).
//!
//! - [`dlq`]: the dead-letter queue read, classified, purged of stale entries and redriven (the
//!   one place SQS is touched here).
//!
//! [`DETACHED_CANCEL_TIMEOUT`]: cancel::DETACHED_CANCEL_TIMEOUT

pub mod bulk;
pub mod cancel;
pub mod dlq;
pub mod inputs;
pub mod replay;
pub mod rerun;
pub mod schedules;
