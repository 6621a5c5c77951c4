//! From a definition to a [`Plan`]: every rule a definition is checked against, each problem
//! reported at its field path, the configuration's defaults applied.
//!
//! # Layout
//!
//! - this file: [`WorkflowDefinition::plan_for`], the run-level checks (name, idempotency key,
//!   step count, inputs size) and the index of steps by name.
//! - [`step`]: one step planned: its fields, dependencies, attempts, timeout, retry policy, map
//!   and concurrency key.
//! - [`references`]: what submit refuses in the references of the steps' inputs, of a map's
//!   `for_each` and of the run's output.
//!
//! The order of the problems is the order of these checks: the run's inputs, the run, each step
//! in turn, the references, then a dependency cycle (looked for only when nothing else is wrong).

mod references;
mod step;

use std::collections::HashMap;

use crate::config::Config;
use crate::workflow::cycle::cycle_problem;
use crate::workflow::definition::WorkflowDefinition;
use crate::workflow::inputs::{self, RunInputs};
use crate::workflow::limits::{MAX_NAME_LEN, MAX_RUN_TIMEOUT_SECONDS, MAX_STEPS};
use crate::workflow::plan::{Plan, PlannedStep};
use crate::workflow::problem::{Error, Problem};

use step::StepRules;

impl WorkflowDefinition {
    /// Checks the definition against the limits of `config` and applies its defaults; no run
    /// input is given (each takes its default, and a required one is a problem).
    pub fn plan(&self, config: &Config) -> Result<Plan, Error> {
        self.plan_for(config, &serde_json::Map::new(), |_, _| false)
    }

    /// [`plan`](Self::plan) with the run inputs `given` at submit (checked against the
    /// declarations, see [`inputs::resolve`]), knowing which steps run in-process
    /// (`in_process(operation, version)`, as routing decides: see `Registry::in_process`). Such a
    /// step runs inside one invocation and cannot detach, so its timeout must fit
    /// [`Config::invocation_budget`]; a remote step may ask for up to a day.
    pub fn plan_for(
        &self,
        config: &Config,
        given: &serde_json::Map<String, serde_json::Value>,
        in_process: impl Fn(&str, Option<&str>) -> bool,
    ) -> Result<Plan, Error> {
        let mut problems = Vec::new();
        let inputs = inputs::resolve(&self.inputs, given, &mut problems);
        let mut problem = |path: String, message: String| problems.push(Problem { path, message });

        self.check_run(config, &inputs, &mut problem);
        let index = self.index_steps(&mut problem);
        let rules = StepRules { config, index: &index, inputs: &inputs, in_process: &in_process };
        let steps: Vec<PlannedStep> =
            self.steps.iter().enumerate().map(|(i, step)| rules.plan(i, step, &mut problem)).collect();

        problems.extend(references::check(&steps, &inputs));
        if let Some(output) = &self.output {
            problems.extend(references::check_output(&steps, output, &inputs));
        }
        if problems.is_empty()
            && let Some(cycle) = cycle_problem(&steps)
        {
            problems.push(cycle);
        }
        if !problems.is_empty() {
            return Err(Error::Invalid(problems));
        }
        Ok(Plan {
            name: self.name.clone(),
            idempotency_key: self.idempotency_key.clone(),
            inputs: inputs.values,
            output: self.output.clone().filter(|o| !o.is_null()),
            timeout_seconds: self.timeout_seconds,
            steps,
        })
    }

    /// The run as a whole: its name, its idempotency key, how many steps it has, the size of its
    /// inputs.
    fn check_run(&self, config: &Config, inputs: &RunInputs, problem: &mut impl FnMut(String, String)) {
        check_name("name", &self.name, problem);
        if let Some(key) = &self.idempotency_key
            && (key.is_empty() || key.len() > MAX_NAME_LEN)
        {
            problem("idempotency_key".into(), format!("must be 1 to {MAX_NAME_LEN} characters"));
        }
        if let Some(t) = self.timeout_seconds
            && !(1..=MAX_RUN_TIMEOUT_SECONDS).contains(&t)
        {
            problem("timeout_seconds".into(), format!("must be 1 to {MAX_RUN_TIMEOUT_SECONDS} (a year)"));
        }
        if self.steps.is_empty() {
            problem("steps".into(), "a workflow needs at least one step".into());
        }
        if self.steps.len() > MAX_STEPS {
            problem("steps".into(), format!("{} steps; at most {MAX_STEPS} are allowed", self.steps.len()));
        }
        check_inputs_size(inputs, config, problem);
    }

    /// Each step's index by its name; a name used twice is a problem (the later use is indexed).
    fn index_steps(&self, problem: &mut impl FnMut(String, String)) -> HashMap<&str, usize> {
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (i, step) in self.steps.iter().enumerate() {
            if let Some(first) = index.insert(step.name.as_str(), i) {
                problem(
                    format!("steps[{i}].name"),
                    format!("duplicate step name {:?} (also steps[{first}])", step.name),
                );
            }
        }
        index
    }
}

/// The run's inputs (given or defaults) are within the input size limit, and none is named
/// `$stored` (the key of the reference large inputs are stored as: [`crate::stored`]);
/// [`inputs::resolve`] checks that they hold no secret.
fn check_inputs_size(inputs: &RunInputs, config: &Config, problem: &mut impl FnMut(String, String)) {
    let bytes = inputs.values.to_string().len();
    if bytes > config.max_input_bytes {
        problem(
            "inputs".into(),
            format!("{bytes} bytes; at most {} are allowed (RARA_MAX_INPUT_BYTES)", config.max_input_bytes),
        );
    }
    if inputs.types.contains_key(crate::stored::KEY) {
        let mut path = "inputs".to_owned();
        crate::secret_material::push_key(&mut path, crate::stored::KEY);
        problem(path, "the name is reserved: rara stores large run inputs as {\"$stored\": …}".into());
    }
}

/// A run or step name: 1 to [`MAX_NAME_LEN`] characters of letters, digits and `- _ . : /`.
fn check_name(path: &str, name: &str, problem: &mut impl FnMut(String, String)) {
    let valid_chars = name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '/'));
    if name.is_empty() || name.len() > MAX_NAME_LEN || !valid_chars {
        problem(
            path.to_owned(),
            format!("{name:?} must be 1 to {MAX_NAME_LEN} characters of letters, digits and - _ . : /"),
        );
    }
}

#[cfg(test)]
mod bounds_tests;
#[cfg(test)]
mod tests;
