//! What a valid definition becomes: the [`Plan`] submit stores, its steps with their defaults
//! applied and their dependencies as indices.

use std::time::Duration;

use crate::flow::Concurrency;
use crate::retry::RetryPolicy;
use crate::wait::Wait;

/// A step ready to be stored: defaults applied, dependencies as indices into the step list.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedStep {
    pub name: String,
    pub operation: String,
    pub version: Option<String>,
    pub input: serde_json::Value,
    pub depends_on: Vec<usize>,
    pub retry: RetryPolicy,
    pub timeout: Duration,
    /// Set for a map step (`for_each`).
    pub map: Option<MapSpec>,
    /// The concurrency key (template filled from the run's inputs) and limit.
    pub concurrency: Option<Concurrency>,
    pub priority: i32,
    /// Set for a step that waits (its `operation` is then the wait's, `wait.timer`, ...).
    pub wait: Option<Wait>,
}

/// What makes a step a map: the list it runs over and how many children may run at once.
#[derive(Debug, Clone, PartialEq)]
pub struct MapSpec {
    /// A reference (`$output`, `$input`) or a literal list.
    pub items: serde_json::Value,
    pub max_concurrency: Option<u32>,
    /// How many children may fail with the map still succeeding.
    pub tolerated_failures: Option<u32>,
}

/// A validated workflow: every dependency exists, there is no cycle, every limit holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub name: String,
    pub idempotency_key: Option<String>,
    /// The run's inputs (an object): the values given at submit, or else the defaults.
    pub inputs: serde_json::Value,
    /// The run's output as defined (a value holding references), if it declares one.
    pub output: Option<serde_json::Value>,
    /// The run's deadline from its submission (`timeout_seconds`): cancelled with
    /// `RUN_TIMED_OUT` once it passes.
    pub timeout_seconds: Option<u64>,
    pub steps: Vec<PlannedStep>,
}
