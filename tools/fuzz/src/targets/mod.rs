//! The targets, one module each, and [`run`], which runs one by name.
//!
//! - `workflow`: definition text (JSON or YAML) → [`rara_domain::workflow::WorkflowDefinition`]
//!   → plan, as `rara submit` and `POST /api/runs` do.
//! - `message`: SQS bodies → [`rara_queue::parse_steps`] (formats 1 and 2) and back.
//! - `retry`: [`rara_domain::retry::RetryPolicy::decide`] with any policy and any error details.
//! - `remote`: an `Execute` stream's events, as bytes and as values, through
//!   [`rara_remote::protocol::EventOrder`], and every field through the bounds the client
//!   applies (`remote_fields.rs`).
//!
//! Shared: `values.rs` (JSON values, numbers and text at the edges), `mutate.rs` (a JSON
//! value changed at one node).

pub mod message;
pub mod mutate;
pub mod remote;
pub mod remote_fields;
pub mod retry;
pub mod values;
pub mod workflow;

use crate::runner::{Budget, Report, fuzz};

/// Every target's name, in the order `make fuzz` runs them.
pub const NAMES: [&str; 4] = ["workflow", "message", "retry", "remote"];

/// Runs the target called `name`.
pub fn run(name: &str, seed: u64, budget: Budget) -> anyhow::Result<Report> {
    Ok(match name {
        "workflow" => fuzz(&workflow::Workflow::new()?, seed, budget),
        "message" => fuzz(&message::Message, seed, budget),
        "retry" => fuzz(&retry::Retry, seed, budget),
        "remote" => fuzz(&remote::Remote, seed, budget),
        _ => anyhow::bail!("no target {name:?}; the targets are {}", NAMES.join(", ")),
    })
}
