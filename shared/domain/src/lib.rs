//! rara's domain: what a step is and how it may change, independent of Postgres, SQS or Lambda.
//!
//! # Layout
//!
//! - [`state`]: step, run and attempt states and the transitions the state machine allows.
//! - [`step_error`]: the structured error every failure carries (code, message, retryable, details).
//! - [`retry`]: the retry policy (exponential backoff with full jitter) and the retry decision.
//! - [`config`]: the typed configuration read once at start, with the SQS/lease alignment checks.
//! - [`flow`]: flow control in a definition: a step's concurrency key (a template over the
//!   run's inputs) and limit, and rates (`50/s`).
//! - [`human`]: durations and ratios rounded for people (`2.67 s`), in every message.
//! - [`executor`]: the [`executor::Executor`] trait and the context an execution receives.
//! - [`registry`]: explicit name → executor registrations, and routing of an operation.
//! - [`schedule`]: schedules: the calendar (cron in a zone, or every), overlap, a slot's key,
//!   jitter and run.
//! - [`secret_material`]: secret references (`{"$secret": "name"}`) and the detection of
//!   secrets embedded in a step's input.
//! - [`stored`]: the reference an offloaded output becomes (`{"$stored": {uri, size, digest}}`).
//! - [`workflow`]: the workflow definition format (JSON or YAML) and its validation, with
//!   [`references`] (in a step's input, to upstream outputs, artifacts and the run's inputs:
//!   `{"$output": "fetch", "pointer": "/body"}`; parsing, scanning, substitution) and
//!   [`inputs`] (a run's declared inputs, `{type, default}`, and the values given at submit),
//!   re-exported here under their own names.

pub mod config;
pub mod executor;
pub mod flow;
pub mod human;
pub mod registry;
pub mod retry;
pub mod schedule;
pub mod secret_material;
pub mod state;
pub mod step_error;
pub mod stored;
pub mod wait;
pub mod workflow;

pub use step_error::StepError;
pub use workflow::{inputs, references};
