//! One step planned: each field checked at its path (`steps[2].timeout_seconds`), the
//! configuration's defaults applied, its dependencies turned into indices.

use std::collections::HashMap;
use std::time::Duration;

use crate::config::Config;
use crate::flow::{self, Concurrency};
use crate::retry::RetryPolicy;
use crate::secret_material;
use crate::wait::WaitSpec;
use crate::workflow::child::{CHILD_OPERATION, ChildRunSpec};
use crate::workflow::definition::{RetrySpec, StepDefinition};
use crate::workflow::inputs::RunInputs;
use crate::workflow::limits::{
    MAX_OPERATION_LEN, MAX_RETRY_DELAY_SECONDS, MAX_RETRY_MULTIPLIER, MAX_TIMEOUT_SECONDS, valid_operation,
};
use crate::workflow::plan::{MapSpec, PlannedStep};
use crate::workflow::references::join;

use super::check_name;

/// What a step is planned against: the configuration, the index of the steps by name, the
/// run's inputs (which fill a concurrency key) and which operations run in-process.
pub(super) struct StepRules<'a> {
    pub config: &'a Config,
    pub index: &'a HashMap<&'a str, usize>,
    pub inputs: &'a RunInputs,
    pub in_process: &'a dyn Fn(&str, Option<&str>) -> bool,
}

impl StepRules<'_> {
    /// The step at `i`, each of its problems reported through `problem`.
    pub fn plan(&self, i: usize, step: &StepDefinition, problem: &mut impl FnMut(String, String)) -> PlannedStep {
        let at = |field: &str| format!("steps[{i}].{field}");
        if let Some(wait) = &step.wait {
            let depends_on = self.dependencies(i, step, problem);
            return self.plan_wait(step, wait, depends_on, &at, problem);
        }
        if let Some(run) = &step.run {
            return self.plan_child(i, step, run, problem);
        }
        if step.operation == CHILD_OPERATION {
            problem(at("operation"), format!("{CHILD_OPERATION:?} is reserved: a step runs a workflow with `run:`"));
        }
        self.plan_operation(i, step, problem)
    }

    /// A step that runs an operation (an executor's, or [`CHILD_OPERATION`]).
    fn plan_operation(&self, i: usize, step: &StepDefinition, problem: &mut impl FnMut(String, String)) -> PlannedStep {
        let at = |field: &str| format!("steps[{i}].{field}");
        self.check_fields(step, &at, problem);
        let depends_on = self.dependencies(i, step, problem);
        let max_attempts = self.max_attempts(step, &at, problem);
        let timeout_seconds = self.timeout_seconds(step, &at, problem);
        let retry = plan_retry(step.retry.as_ref(), max_attempts, self.config, &at, problem);
        let map = plan_map(step, &at, problem);
        let concurrency = self.concurrency(step, &at, problem);
        PlannedStep {
            name: step.name.clone(),
            operation: step.operation.clone(),
            version: step.version.clone(),
            input: step.input.clone(),
            depends_on,
            retry,
            timeout: Duration::from_secs(timeout_seconds),
            map,
            concurrency,
            priority: step.priority.unwrap_or(0),
            wait: None,
        }
    }

    /// The name, the operation, the version, and the input: an object, without secret material,
    /// within the input size limit.
    fn check_fields(
        &self,
        step: &StepDefinition,
        at: &impl Fn(&str) -> String,
        problem: &mut impl FnMut(String, String),
    ) {
        check_name(&at("name"), &step.name, problem);
        if !valid_operation(&step.operation) {
            problem(
                at("operation"),
                format!(
                    "must be 1 to {MAX_OPERATION_LEN} characters of ASCII letters, digits and . _ : - \
                     (it is {} characters)",
                    step.operation.chars().count()
                ),
            );
        }
        if step.version.as_deref().is_some_and(str::is_empty) {
            problem(at("version"), "must not be empty; leave it out to accept any version".into());
        }
        // A child step's input is its `run:` (`{"workflow", "version", "inputs"}`).
        let input = if step.operation == CHILD_OPERATION { "run" } else { "input" };
        if !step.input.is_object() {
            problem(at(input), "must be an object".into());
        }
        for finding in secret_material::scan(&step.input) {
            problem(join(&at(input), &finding.path), finding.kind.to_string());
        }
        let input_bytes = step.input.to_string().len();
        if input_bytes > self.config.max_input_bytes {
            problem(
                at(input),
                format!(
                    "{input_bytes} bytes; at most {} are allowed (RARA_MAX_INPUT_BYTES)",
                    self.config.max_input_bytes
                ),
            );
        }
    }

    /// A step that waits: its name, the wait ([`WaitSpec::plan`]), and none of what only a step
    /// that runs an operation has (an operation, an input, attempts, a timeout, a retry policy,
    /// `for_each`, a concurrency key, a priority). One attempt: `rara retry` waits again.
    fn plan_wait(
        &self,
        step: &StepDefinition,
        wait: &WaitSpec,
        depends_on: Vec<usize>,
        at: &impl Fn(&str) -> String,
        problem: &mut impl FnMut(String, String),
    ) -> PlannedStep {
        check_name(&at("name"), &step.name, problem);
        let runs_an_operation = [
            ("operation", !step.operation.is_empty()),
            ("version", step.version.is_some()),
            ("input", step.input.as_object().is_none_or(|o| !o.is_empty())),
            ("max_attempts", step.max_attempts.is_some()),
            ("timeout_seconds", step.timeout_seconds.is_some()),
            ("retry", step.retry.is_some()),
            ("for_each", step.for_each.is_some()),
            ("concurrency", step.concurrency.is_some()),
            ("priority", step.priority.is_some()),
            ("run", step.run.is_some()),
        ];
        for (field, _) in runs_an_operation.iter().filter(|(_, set)| *set) {
            problem(
                at(field),
                "a step that waits has no operation and none of its settings (use wait.timeout_seconds)".into(),
            );
        }
        let wait = wait.plan(self.inputs, at, problem);
        let mut retry = self.config.default_retry.clone();
        retry.max_attempts = 1;
        PlannedStep {
            name: step.name.clone(),
            operation: wait.as_ref().map_or("wait", |w| w.operation()).to_owned(),
            version: None,
            input: serde_json::Value::Object(Default::default()),
            depends_on,
            retry,
            timeout: self.config.default_step_timeout,
            map: None,
            concurrency: None,
            priority: 0,
            wait,
        }
    }

    /// A step that runs a registered workflow (`run:`, [`crate::workflow::child`]): planned as
    /// an operation step of [`CHILD_OPERATION`] whose input is the child's spec (its inputs'
    /// references substituted at claim), with every setting of an operation step but the
    /// operation, its version and its input, which `run:` replaces.
    fn plan_child(
        &self,
        i: usize,
        step: &StepDefinition,
        run: &ChildRunSpec,
        problem: &mut impl FnMut(String, String),
    ) -> PlannedStep {
        let at = |field: &str| format!("steps[{i}].{field}");
        let replaced = [
            ("operation", !step.operation.is_empty()),
            ("version", step.version.is_some()),
            ("input", step.input.as_object().is_none_or(|o| !o.is_empty())),
        ];
        for (field, _) in replaced.iter().filter(|(_, set)| *set) {
            problem(at(field), "a step that runs a workflow takes its inputs in run.inputs".into());
        }
        let input = run.plan().unwrap_or_else(|(field, message)| {
            problem(at(&format!("run.{field}")), message);
            serde_json::json!({})
        });
        let written =
            StepDefinition { operation: CHILD_OPERATION.to_owned(), version: None, input, run: None, ..step.clone() };
        self.plan_operation(i, &written, problem)
    }

    /// The indices of the steps `depends_on` names: each one known, not the step itself, listed
    /// once.
    fn dependencies(&self, i: usize, step: &StepDefinition, problem: &mut impl FnMut(String, String)) -> Vec<usize> {
        let mut depends_on = Vec::with_capacity(step.depends_on.len());
        for (j, dep) in step.depends_on.iter().enumerate() {
            match self.index.get(dep.as_str()) {
                Some(&d) if d == i => {
                    problem(format!("steps[{i}].depends_on[{j}]"), "a step cannot depend on itself".into())
                }
                Some(&d) if depends_on.contains(&d) => {
                    problem(format!("steps[{i}].depends_on[{j}]"), format!("{dep:?} is listed twice"))
                }
                Some(&d) => depends_on.push(d),
                None => problem(format!("steps[{i}].depends_on[{j}]"), format!("unknown step {dep:?}")),
            }
        }
        depends_on
    }

    /// `max_attempts`, or the configured default: between 1 and `RARA_MAX_ATTEMPTS_LIMIT`.
    fn max_attempts(
        &self,
        step: &StepDefinition,
        at: &impl Fn(&str) -> String,
        problem: &mut impl FnMut(String, String),
    ) -> u32 {
        let config = self.config;
        let max_attempts = step.max_attempts.unwrap_or(config.default_retry.max_attempts);
        if max_attempts == 0 || max_attempts > config.max_attempts_limit {
            problem(
                at("max_attempts"),
                format!(
                    "{max_attempts}; must be between 1 and {} (RARA_MAX_ATTEMPTS_LIMIT)",
                    config.max_attempts_limit
                ),
            );
        }
        max_attempts
    }

    /// `timeout_seconds`, or the configured default: at most a day, and within one invocation's
    /// budget for a step that runs in-process (it cannot detach).
    fn timeout_seconds(
        &self,
        step: &StepDefinition,
        at: &impl Fn(&str) -> String,
        problem: &mut impl FnMut(String, String),
    ) -> u64 {
        let config = self.config;
        let timeout_seconds = step.timeout_seconds.unwrap_or(config.default_step_timeout.as_secs());
        if timeout_seconds == 0 || timeout_seconds > MAX_TIMEOUT_SECONDS {
            problem(at("timeout_seconds"), format!("{timeout_seconds}; must be between 1 and {MAX_TIMEOUT_SECONDS}"));
        } else if timeout_seconds > config.invocation_budget().as_secs()
            && (self.in_process)(&step.operation, step.version.as_deref())
        {
            problem(
                at("timeout_seconds"),
                format!(
                    "{timeout_seconds}; {:?} runs in-process, inside one invocation, so at most {} \
                     (RARA_FUNCTION_TIMEOUT_SECONDS less RARA_DEADLINE_MARGIN_MS); a longer step runs on a \
                     remote executor that detaches",
                    step.operation,
                    config.invocation_budget().as_secs()
                ),
            );
        }
        timeout_seconds
    }

    /// The concurrency key with its template filled from the run's inputs, and its limit (at
    /// least 1).
    fn concurrency(
        &self,
        step: &StepDefinition,
        at: &impl Fn(&str) -> String,
        problem: &mut impl FnMut(String, String),
    ) -> Option<Concurrency> {
        step.concurrency.as_ref().and_then(|c| {
            if c.limit == Some(0) {
                problem(at("concurrency.limit"), "must be at least 1".into());
            }
            flow::fill_key(&c.key, &self.inputs.values)
                .map_err(|message| problem(at("concurrency.key"), message))
                .ok()
                .map(|key| Concurrency { key, limit: c.limit })
        })
    }
}

/// A map step's spec (`for_each`, `max_concurrency` of at least 1, `tolerated_failures`), or
/// `None`; a step without `for_each` has no children to bound or to fail.
fn plan_map(
    step: &StepDefinition,
    at: &impl Fn(&str) -> String,
    problem: &mut impl FnMut(String, String),
) -> Option<MapSpec> {
    if step.max_concurrency == Some(0) {
        problem(at("max_concurrency"), "must be at least 1".into());
    }
    match &step.for_each {
        Some(items) => Some(MapSpec {
            items: items.clone(),
            max_concurrency: step.max_concurrency,
            tolerated_failures: step.tolerated_failures,
        }),
        None => {
            if step.max_concurrency.is_some() {
                problem(at("max_concurrency"), "only a step with for_each has children to bound".into());
            }
            if step.tolerated_failures.is_some() {
                problem(at("tolerated_failures"), "only a step with for_each has children to fail".into());
            }
            None
        }
    }
}

/// The step's retry policy: its `retry:` settings over the configured defaults, each checked
/// (delays of 0 to [`MAX_RETRY_DELAY_SECONDS`], the longest at least the first, a finite
/// multiplier of 1 to [`MAX_RETRY_MULTIPLIER`]). A number is converted to a `Duration` only
/// once it is known to be in bounds.
fn plan_retry(
    spec: Option<&RetrySpec>,
    max_attempts: u32,
    config: &Config,
    at: &impl Fn(&str) -> String,
    problem: &mut impl FnMut(String, String),
) -> RetryPolicy {
    let defaults = &config.default_retry;
    let spec = spec.cloned().unwrap_or_default();
    let bound = MAX_RETRY_DELAY_SECONDS as f64;
    let mut seconds = |field: &str, value: Option<f64>, default: Duration| match value {
        None => default,
        Some(v) if v.is_finite() && (0.0..=bound).contains(&v) => Duration::try_from_secs_f64(v).unwrap_or(default),
        Some(v) => {
            problem(
                at(&format!("retry.{field}")),
                format!("{}; must be a number of seconds from 0 to {MAX_RETRY_DELAY_SECONDS}", shown(v)),
            );
            default
        }
    };
    let initial_delay = seconds("initial_delay_seconds", spec.initial_delay_seconds, defaults.initial_delay);
    let max_delay = seconds("max_delay_seconds", spec.max_delay_seconds, defaults.max_delay.max(initial_delay));
    let multiplier = spec.multiplier.unwrap_or(defaults.multiplier);
    if max_delay < initial_delay {
        problem(at("retry.max_delay_seconds"), "must be at least retry.initial_delay_seconds".into());
    }
    if !(multiplier.is_finite() && (1.0..=MAX_RETRY_MULTIPLIER).contains(&multiplier)) {
        problem(
            at("retry.multiplier"),
            format!("{}; must be a number from 1 to {MAX_RETRY_MULTIPLIER}", shown(multiplier)),
        );
    }
    RetryPolicy {
        max_attempts,
        initial_delay,
        max_delay,
        multiplier,
        non_retryable_codes: defaults.non_retryable_codes.clone(),
    }
}

/// A number as an author would read it back: `1e300`, not its 301 digits.
fn shown(v: f64) -> String {
    if v.is_finite() && v.abs() >= 1e15 { format!("{v:e}") } else { v.to_string() }
}
