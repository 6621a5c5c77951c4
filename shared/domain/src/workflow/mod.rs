//! The workflow definition format (JSON or YAML) and its validation.
//!
//! ```yaml
//! name: nightly-report
//! idempotency_key: nightly-2026-12-02   # optional: the same key returns the existing run
//! steps:
//!   - name: fetch
//!     operation: http.request
//!     input: { method: GET, url: "https://example.com/data" }
//!     max_attempts: 3
//!     timeout_seconds: 30
//!     retry: { initial_delay_seconds: 1, max_delay_seconds: 60, multiplier: 2 }
//!   - name: summarise
//!     operation: text.stats
//!     version: "1.0.0"                    # optional: pin a remote capability version
//!     depends_on: [fetch]
//! ```
//! Validation reports every problem with the path of the field at fault
//! (`steps[1].depends_on[0]: unknown step "fetc"`). Secrets in an input are referenced,
//! not embedded (`headers: { authorization: { $secret: api } }`): an input holding what
//! looks like secret material is refused (see [`crate::secret_material`]).
//!
//! Data flows through references (see [`references`]): `inputs:` declares the run's
//! inputs (`inputs: { date: { type: string }, limit: { type: integer, default: 10 } }`, see
//! [`inputs`]), given at submit (`rara submit --input date=2026-12-02`), and a step's
//! input takes values from them and from the steps it depends on:
//! `input: { text: { $output: fetch, pointer: /body }, date: { $input: /date } }`.
//! `output:` is the run's output, any value holding references to its steps and inputs,
//! resolved once it succeeded (`outputs:` is read as `output:`).
//!
//! A step with `for_each` is a map: it runs once per element of a list, the output of a step
//! it depends on or a run input (`for_each: { $output: split, pointer: /parts }`,
//! `for_each: { $input: /items }`), at most `max_concurrency` at once. Its input is the
//! template of each child's: `{"$item": "/pointer"}` is the element (or a part of it). Its
//! output, for the steps that depend on it, is the list of the children's outputs in order
//! (`null` for a child that failed, when `tolerated_failures` lets the map succeed anyway).
//!
//! Flow control (see [`crate::flow`]): `concurrency: { key: "tenant-{input.tenant}", limit: 2 }`
//! puts a step under a key (its template filled from the run's inputs at submit), and
//! `priority: 10` runs it before lower ones (default 0).
//!
//! # Layout
//!
//! From the bottom up (a module uses only those above it in this list):
//!
//! - `limits.rs`: the bounds a definition is held to ([`MAX_STEPS`], …).
//! - `problem.rs`: [`Problem`] (one thing wrong, at a field path) and [`Error`].
//! - [`references`]: the reference forms (`$output`, `$artifact`, `$input`, `$item`), finding
//!   them in a value and substituting them at claim.
//! - [`inputs`]: a run's declared inputs and the values given at submit.
//! - `definition.rs`: [`WorkflowDefinition`] as written, parsed from JSON or YAML.
//! - `plan.rs`: [`Plan`] and [`PlannedStep`], what a valid definition becomes.
//! - `cycle.rs`: the first dependency cycle among planned steps.
//! - `planner/`: [`WorkflowDefinition::plan_for`], every check, in parts.
//! - [`child`]: a step that runs a registered workflow (`run:`) and waits for it.
//! - `registered.rs`: [`WorkflowRef`] (`NAME[@VERSION]`) and the checks of a registration.

pub mod child;
mod cycle;
mod definition;
pub mod inputs;
mod limits;
mod plan;
mod planner;
mod problem;
pub mod references;
mod registered;

pub use definition::{Format, RetrySpec, StepDefinition, WorkflowDefinition};
pub use limits::{
    MAX_MAP_ITEMS, MAX_NAME_LEN, MAX_OPERATION_LEN, MAX_RETRY_DELAY_SECONDS, MAX_RETRY_MULTIPLIER, MAX_RUN_STEPS,
    MAX_RUN_TIMEOUT_SECONDS, MAX_STEPS, MAX_TIMEOUT_SECONDS, valid_operation,
};
pub use plan::{MapSpec, Plan, PlannedStep};
pub use problem::{Error, Problem};
pub use registered::WorkflowRef;
