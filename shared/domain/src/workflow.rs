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
//! Data flows through references (see [`crate::references`]): `inputs:` declares the run's
//! inputs (`inputs: { date: { type: string }, limit: { type: integer, default: 10 } }`, see
//! [`crate::inputs`]), given at submit (`rara submit --input date=2026-12-02`), and a step's
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

use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::flow::{Concurrency, ConcurrencySpec};
use crate::inputs::{self, RunInputs};
use crate::references;
use crate::retry::RetryPolicy;
use crate::secret_material;

/// The most steps one workflow may have.
pub const MAX_STEPS: usize = 10_000;
/// The longest name (run or step) accepted.
pub const MAX_NAME_LEN: usize = 200;
/// The longest step timeout accepted (a day); heartbeats keep long steps leased.
pub const MAX_TIMEOUT_SECONDS: u64 = 24 * 60 * 60;
/// The most elements a map step runs over (its children).
pub const MAX_MAP_ITEMS: usize = 10_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowDefinition {
    pub name: String,
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// The declarations of the run's inputs (name to `{type, default, description}`, see
    /// [`crate::inputs`]), read by `{"$input": "/pointer"}` references. Kept as written: the
    /// plan checks each one at its path.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub inputs: serde_json::Map<String, serde_json::Value>,
    /// The run's output: any value holding references to its steps and to its inputs,
    /// resolved when the succeeded run is read.
    #[serde(default, alias = "outputs", skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Value>,
    pub steps: Vec<StepDefinition>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepDefinition {
    pub name: String,
    pub operation: String,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default = "empty_object")]
    pub input: serde_json::Value,
    #[serde(default)]
    pub depends_on: Vec<String>,
    #[serde(default)]
    pub max_attempts: Option<u32>,
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    #[serde(default)]
    pub retry: Option<RetrySpec>,
    /// Fan-out: the list the step runs over, once per element (a reference to a dependency's
    /// output or to a run input, or a literal list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_each: Option<serde_json::Value>,
    /// With `for_each`: at most this many children run at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
    /// With `for_each`: this many children may fail (for good) and the map still succeeds,
    /// with `null` in its output where a failed child's output would be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerated_failures: Option<u32>,
    /// Flow control: the step's concurrency key and limit (see [`crate::flow`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<ConcurrencySpec>,
    /// Higher first, within the fair share between keys; default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
}

/// Per-step retry settings; what is left out comes from the configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrySpec {
    #[serde(default)]
    pub initial_delay_seconds: Option<f64>,
    #[serde(default)]
    pub max_delay_seconds: Option<f64>,
    #[serde(default)]
    pub multiplier: Option<f64>,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

/// The text format of a definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Yaml,
}

impl Format {
    /// From a file name's extension; anything but `.json` is read as YAML (a superset of JSON).
    pub fn from_path(path: &std::path::Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some(ext) if ext.eq_ignore_ascii_case("json") => Format::Json,
            _ => Format::Yaml,
        }
    }
}

/// One thing wrong with a definition, at a field path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the definition is not valid JSON")]
    Json(#[from] serde_json::Error),
    #[error("the definition is not valid YAML")]
    Yaml(#[from] serde_saphyr::Error),
    #[error("the definition is invalid:\n{}", .0.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<Problem>),
}

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
    pub steps: Vec<PlannedStep>,
}

impl WorkflowDefinition {
    /// Parses a definition; unknown fields are errors.
    pub fn parse(text: &str, format: Format) -> Result<Self, Error> {
        Ok(match format {
            Format::Json => serde_json::from_str(text)?,
            Format::Yaml => serde_saphyr::from_str(text)?,
        })
    }

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

        check_name("name", &self.name, &mut problem);
        if let Some(key) = &self.idempotency_key
            && (key.is_empty() || key.len() > MAX_NAME_LEN)
        {
            problem("idempotency_key".into(), format!("must be 1 to {MAX_NAME_LEN} characters"));
        }
        if self.steps.is_empty() {
            problem("steps".into(), "a workflow needs at least one step".into());
        }
        if self.steps.len() > MAX_STEPS {
            problem("steps".into(), format!("{} steps; at most {MAX_STEPS} are allowed", self.steps.len()));
        }

        check_inputs_size(&inputs, config, &mut problem);

        let mut index: HashMap<&str, usize> = HashMap::new();
        for (i, step) in self.steps.iter().enumerate() {
            if let Some(first) = index.insert(step.name.as_str(), i) {
                problem(
                    format!("steps[{i}].name"),
                    format!("duplicate step name {:?} (also steps[{first}])", step.name),
                );
            }
        }

        let mut steps = Vec::with_capacity(self.steps.len());
        for (i, step) in self.steps.iter().enumerate() {
            let at = |field: &str| format!("steps[{i}].{field}");
            check_name(&at("name"), &step.name, &mut problem);
            if step.operation.is_empty() || step.operation.chars().any(char::is_whitespace) {
                problem(at("operation"), "must be a non-empty name without whitespace".into());
            }
            if step.version.as_deref().is_some_and(str::is_empty) {
                problem(at("version"), "must not be empty; leave it out to accept any version".into());
            }
            if !step.input.is_object() {
                problem(at("input"), "must be an object".into());
            }
            for finding in secret_material::scan(&step.input) {
                let path = match finding.path.as_str() {
                    "" => at("input"),
                    p if p.starts_with('[') => at(&format!("input{p}")),
                    p => at(&format!("input.{p}")),
                };
                problem(path, finding.kind.to_string());
            }
            let input_bytes = step.input.to_string().len();
            if input_bytes > config.max_input_bytes {
                problem(
                    at("input"),
                    format!(
                        "{input_bytes} bytes; at most {} are allowed (RARA_MAX_INPUT_BYTES)",
                        config.max_input_bytes
                    ),
                );
            }
            let mut depends_on = Vec::with_capacity(step.depends_on.len());
            for (j, dep) in step.depends_on.iter().enumerate() {
                match index.get(dep.as_str()) {
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
            let timeout_seconds = step.timeout_seconds.unwrap_or(config.default_step_timeout.as_secs());
            if timeout_seconds == 0 || timeout_seconds > MAX_TIMEOUT_SECONDS {
                problem(
                    at("timeout_seconds"),
                    format!("{timeout_seconds}; must be between 1 and {MAX_TIMEOUT_SECONDS}"),
                );
            } else if timeout_seconds > config.invocation_budget().as_secs()
                && in_process(&step.operation, step.version.as_deref())
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
            let retry = plan_retry(step.retry.as_ref(), max_attempts, config, &at, &mut problem);
            if step.max_concurrency == Some(0) {
                problem(at("max_concurrency"), "must be at least 1".into());
            }
            let map = match &step.for_each {
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
            };
            let concurrency = step.concurrency.as_ref().and_then(|c| {
                if c.limit == Some(0) {
                    problem(at("concurrency.limit"), "must be at least 1".into());
                }
                crate::flow::fill_key(&c.key, &inputs.values)
                    .map_err(|message| problem(at("concurrency.key"), message))
                    .ok()
                    .map(|key| Concurrency { key, limit: c.limit })
            });
            steps.push(PlannedStep {
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
            });
        }

        problems.extend(references::check(&steps, &inputs));
        if let Some(output) = &self.output {
            problems.extend(references::check_output(&steps, output, &inputs));
        }
        if problems.is_empty()
            && let Some(cycle) = find_cycle(&steps)
        {
            let names: Vec<&str> = cycle.iter().map(|&i| steps[i].name.as_str()).collect();
            problems.push(Problem {
                path: format!("steps[{}].depends_on", cycle[0]),
                message: format!("dependency cycle: {}", names.join(" -> ")),
            });
        }
        if !problems.is_empty() {
            return Err(Error::Invalid(problems));
        }
        Ok(Plan {
            name: self.name.clone(),
            idempotency_key: self.idempotency_key.clone(),
            inputs: inputs.values,
            output: self.output.clone().filter(|o| !o.is_null()),
            steps,
        })
    }
}

/// The run's inputs (given or defaults) are within the input size limit; [`inputs::resolve`]
/// checks that they hold no secret.
fn check_inputs_size(inputs: &RunInputs, config: &Config, problem: &mut impl FnMut(String, String)) {
    let bytes = inputs.values.to_string().len();
    if bytes > config.max_input_bytes {
        problem(
            "inputs".into(),
            format!("{bytes} bytes; at most {} are allowed (RARA_MAX_INPUT_BYTES)", config.max_input_bytes),
        );
    }
}

fn check_name(path: &str, name: &str, problem: &mut impl FnMut(String, String)) {
    let valid_chars = name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '/'));
    if name.is_empty() || name.len() > MAX_NAME_LEN || !valid_chars {
        problem(
            path.to_owned(),
            format!("{name:?} must be 1 to {MAX_NAME_LEN} characters of letters, digits and - _ . : /"),
        );
    }
}

fn plan_retry(
    spec: Option<&RetrySpec>,
    max_attempts: u32,
    config: &Config,
    at: &impl Fn(&str) -> String,
    problem: &mut impl FnMut(String, String),
) -> RetryPolicy {
    let defaults = &config.default_retry;
    let spec = spec.cloned().unwrap_or_default();
    let mut seconds = |field: &str, value: Option<f64>, default: Duration| match value {
        None => default,
        Some(v) => Duration::try_from_secs_f64(v).unwrap_or_else(|_| {
            problem(at(&format!("retry.{field}")), format!("{v}; must be a non-negative number of seconds"));
            default
        }),
    };
    let initial_delay = seconds("initial_delay_seconds", spec.initial_delay_seconds, defaults.initial_delay);
    let max_delay = seconds("max_delay_seconds", spec.max_delay_seconds, defaults.max_delay.max(initial_delay));
    let multiplier = spec.multiplier.unwrap_or(defaults.multiplier);
    if max_delay < initial_delay {
        problem(at("retry.max_delay_seconds"), "must be at least retry.initial_delay_seconds".into());
    }
    if !multiplier.is_finite() || multiplier < 1.0 {
        problem(at("retry.multiplier"), format!("{multiplier}; must be a number of at least 1"));
    }
    RetryPolicy {
        max_attempts,
        initial_delay,
        max_delay,
        multiplier,
        non_retryable_codes: defaults.non_retryable_codes.clone(),
    }
}

/// A dependency cycle as step indices, first step repeated at the end, or `None`.
fn find_cycle(steps: &[PlannedStep]) -> Option<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut marks = vec![Mark::New; steps.len()];
    for root in 0..steps.len() {
        if marks[root] != Mark::New {
            continue;
        }
        // Iterative depth-first search; `path` holds the open steps with their next edge.
        let mut path: Vec<(usize, usize)> = vec![(root, 0)];
        marks[root] = Mark::Open;
        while let Some(&mut (node, ref mut edge)) = path.last_mut() {
            if let Some(&next) = steps[node].depends_on.get(*edge) {
                *edge += 1;
                match marks[next] {
                    Mark::Open => {
                        let start = path.iter().position(|&(n, _)| n == next).unwrap_or(0);
                        let mut cycle: Vec<usize> = path[start..].iter().map(|&(n, _)| n).collect();
                        cycle.push(next);
                        return Some(cycle);
                    }
                    Mark::New => {
                        marks[next] = Mark::Open;
                        path.push((next, 0));
                    }
                    Mark::Done => {}
                }
            } else {
                marks[node] = Mark::Done;
                path.pop();
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn config() -> Config {
        Config::from_lookup("test", |_| None).unwrap()
    }

    fn problems(text: &str) -> Vec<String> {
        match WorkflowDefinition::parse(text, Format::Yaml).unwrap().plan(&config()) {
            Err(Error::Invalid(p)) => p.iter().map(ToString::to_string).collect(),
            other => panic!("expected problems, got {other:?}"),
        }
    }

    #[test]
    fn yaml_and_json_give_the_same_plan() {
        let yaml = "name: r\nsteps:\n  - {name: a, operation: noop}\n  - {name: b, operation: noop, depends_on: [a], max_attempts: 2}\n";
        let json = r#"{"name":"r","steps":[{"name":"a","operation":"noop"},{"name":"b","operation":"noop","depends_on":["a"],"max_attempts":2}]}"#;
        let a = WorkflowDefinition::parse(yaml, Format::Yaml).unwrap().plan(&config()).unwrap();
        let b = WorkflowDefinition::parse(json, Format::Json).unwrap().plan(&config()).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.steps[1].depends_on, vec![0]);
        assert_eq!(a.steps[1].retry.max_attempts, 2);
        assert_eq!(a.steps[0].retry.max_attempts, config().default_retry.max_attempts);
    }

    /// The error and its causes, as the CLI prints them (`{:#}`): `a: b: c`.
    fn chain(err: &Error) -> String {
        let mut text = err.to_string();
        let mut cause = std::error::Error::source(err);
        while let Some(c) = cause {
            text = format!("{text}: {c}");
            cause = c.source();
        }
        text
    }

    #[test]
    fn an_in_process_step_must_fit_one_invocation_and_a_remote_one_may_run_a_day() {
        let yaml = "name: r\nsteps:\n  - {name: nap, operation: sleep, timeout_seconds: 180}\n  - {name: train, operation: sleep, version: \"1.0.0\", timeout_seconds: 86400}\n";
        let definition = WorkflowDefinition::parse(yaml, Format::Yaml).unwrap();
        // As routing decides: the built-in `sleep` answers to version "1" or none.
        let in_process = |op: &str, version: Option<&str>| op == "sleep" && version.is_none_or(|v| v == "1");
        let problems: Vec<String> = match definition.plan_for(&config(), &Default::default(), in_process) {
            Err(Error::Invalid(p)) => p.iter().map(ToString::to_string).collect(),
            other => panic!("expected problems, got {other:?}"),
        };
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with("steps[0].timeout_seconds: 180; \"sleep\" runs in-process"), "{problems:?}");
        assert!(problems[0].contains("at most 58"), "{problems:?}");
        // Without knowing what runs in-process, both are accepted (a remote step may detach).
        assert!(definition.plan(&config()).is_ok());
    }

    #[test]
    fn unknown_fields_are_refused() {
        let err = WorkflowDefinition::parse("name: r\nsteps: []\ncolour: red\n", Format::Yaml).unwrap_err();
        assert!(chain(&err).contains("colour"), "{err}");
        let err = WorkflowDefinition::parse(
            r#"{"name":"r","steps":[{"name":"a","operation":"x","retries":3}]}"#,
            Format::Json,
        )
        .unwrap_err();
        assert!(chain(&err).contains("retries"), "{err}");
    }

    #[test]
    fn a_parse_error_says_its_own_part_once() {
        let err = WorkflowDefinition::parse(r#"{"name": 1}"#, Format::Json).unwrap_err();
        assert_eq!(err.to_string(), "the definition is not valid JSON");
        let err = WorkflowDefinition::parse("name: [", Format::Yaml).unwrap_err();
        assert_eq!(err.to_string(), "the definition is not valid YAML");
        let cause = std::error::Error::source(&err).map(ToString::to_string).unwrap_or_default();
        assert_eq!(chain(&err).matches(&cause).count(), 1, "{}", chain(&err));
    }

    #[test]
    fn problems_point_to_the_field() {
        let p = problems(
            "name: r\nsteps:\n  - {name: a, operation: noop}\n  - {name: a, operation: noop, depends_on: [zz]}\n  - {name: c, operation: noop, max_attempts: 99}\n",
        );
        assert!(p.iter().any(|l| l.starts_with("steps[1].name: duplicate step name")), "{p:?}");
        assert!(p.iter().any(|l| l == "steps[1].depends_on[0]: unknown step \"zz\""), "{p:?}");
        assert!(p.iter().any(|l| l.starts_with("steps[2].max_attempts: 99")), "{p:?}");
    }

    #[test]
    fn cycles_are_named() {
        let p = problems(
            "name: r\nsteps:\n  - {name: a, operation: noop, depends_on: [c]}\n  - {name: b, operation: noop, depends_on: [a]}\n  - {name: c, operation: noop, depends_on: [b]}\n",
        );
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("dependency cycle: a -> c -> b -> a"), "{p:?}");
    }

    #[test]
    fn oversized_input_is_refused() {
        let mut c = config();
        c.max_input_bytes = 10;
        let def = WorkflowDefinition::parse(
            r#"{"name":"r","steps":[{"name":"a","operation":"x","input":{"k":"a long value"}}]}"#,
            Format::Json,
        )
        .unwrap();
        let err = def.plan(&c).unwrap_err().to_string();
        assert!(err.contains("steps[0].input") && err.contains("RARA_MAX_INPUT_BYTES"), "{err}");
    }

    #[test]
    fn embedded_secrets_are_refused_at_their_field_without_echoing_them() {
        let p = problems(concat!(
            "name: r\nsteps:\n  - {name: a, operation: noop}\n",
            "  - {name: b, operation: http.request, input: {url: 'https://x', headers: {authorization: 'Bearer zz9-top'}}}\n",
            "  - {name: c, operation: noop, input: {keys: ['AKIAIOSFODNN7EXAMPLE'], db: {password: hunter2}}}\n",
        ));
        assert!(
            p.contains(
                &r#"steps[1].input.headers.authorization: looks like a secret (a bearer token); reference it instead: {"$secret": "name"}"#
                    .to_owned()
            ),
            "{p:?}"
        );
        assert!(
            p.iter().any(|l| l.starts_with("steps[2].input.keys[0]: looks like a secret (an AWS access key id)")),
            "{p:?}"
        );
        assert!(
            p.iter().any(|l| l.starts_with("steps[2].input.db.password: looks like a secret (a password)")),
            "{p:?}"
        );
        let all = p.join("\n");
        for value in ["zz9-top", "AKIAIOSFODNN7EXAMPLE", "hunter2"] {
            assert!(!all.contains(value), "{all}");
        }
    }

    #[test]
    fn secret_references_plan_and_are_kept_as_references() {
        let yaml = "name: r\nsteps:\n  - {name: a, operation: http.request, input: {url: 'https://x', headers: {authorization: {$secret: api}}}}\n";
        let plan = WorkflowDefinition::parse(yaml, Format::Yaml).unwrap().plan(&config()).unwrap();
        assert_eq!(plan.steps[0].input["headers"]["authorization"], serde_json::json!({"$secret": "api"}));
        let p = problems("name: r\nsteps:\n  - {name: a, operation: noop, input: {k: {$secret: api, extra: 1}}}\n");
        assert!(p.iter().any(|l| l.starts_with("steps[0].input.k: malformed secret reference")), "{p:?}");
    }

    #[test]
    fn references_name_only_dependencies_direct_or_transitive() {
        let yaml = concat!(
            "name: r\ninputs: {date: {type: string, default: '2026-12-04'}, who: {type: object, default: {name: ada}}}\nsteps:\n",
            "  - {name: fetch, operation: noop}\n",
            "  - {name: summarise, operation: noop, depends_on: [fetch], input: {text: {$output: fech, pointer: /body}, all: [{$output: fetch}], when: {$input: /date}}}\n",
            "  - {name: side, operation: noop, input: {x: {$artifact: fetch, name: report}}}\n",
            "  - {name: last, operation: noop, depends_on: [summarise], input: {a: {$artifact: fetch, name: report}, b: {$output: summarise}, c: {$input: /who/nme}, d: {$output: last}}}\n",
        );
        let p = problems(yaml);
        assert_eq!(
            p,
            [
                r#"steps[1].input.text: $output "fech" is not a dependency of "summarise""#,
                r#"steps[2].input.x: $artifact "fetch" is not a dependency of "side""#,
                r#"steps[3].input.c: $input "/who/nme" finds nothing in the run's inputs"#,
                r#"steps[3].input.d: $output "last" is not a dependency of "last""#,
            ],
        );
    }

    #[test]
    fn a_map_runs_over_a_dependencys_output_or_a_run_input_list() {
        let yaml = concat!(
            "name: r\ninputs: {urls: {type: array, default: [a, b]}}\nsteps:\n",
            "  - {name: split, operation: noop}\n",
            "  - {name: each, operation: noop, depends_on: [split], for_each: {$output: split, pointer: /parts}, max_concurrency: 4, tolerated_failures: 2, input: {url: {$item: /url}}}\n",
            "  - {name: fetch, operation: noop, for_each: {$input: /urls}, input: {url: {$item: ''}}}\n",
            "  - {name: lit, operation: noop, for_each: [1, 2, 3]}\n",
        );
        let plan = WorkflowDefinition::parse(yaml, Format::Yaml).unwrap().plan(&config()).unwrap();
        let map = plan.steps[1].map.as_ref().expect("each is a map");
        assert_eq!(map.items, serde_json::json!({"$output": "split", "pointer": "/parts"}));
        assert_eq!((map.max_concurrency, map.tolerated_failures), (Some(4), Some(2)));
        assert_eq!(plan.steps[1].input, serde_json::json!({"url": {"$item": "/url"}}), "the template is kept");
        assert!(plan.steps[0].map.is_none());

        let p = problems(concat!(
            "name: r\ninputs: {one: {type: string, default: x}, many: {type: array, default: [1]}}\nsteps:\n",
            "  - {name: split, operation: noop}\n",
            "  - {name: a, operation: noop, for_each: {$output: split}}\n",
            "  - {name: b, operation: noop, for_each: {$input: /one}}\n",
            "  - {name: c, operation: noop, for_each: {$input: /none}}\n",
            "  - {name: d, operation: noop, for_each: 'a b', max_concurrency: 0}\n",
            "  - {name: e, operation: noop, input: {x: {$item: /x}}, max_concurrency: 2, tolerated_failures: 1}\n",
            "  - {name: f, operation: noop, depends_on: [split], for_each: {$artifact: split, name: parts}}\n",
        ));
        assert_eq!(
            p,
            [
                "steps[4].max_concurrency: must be at least 1",
                "steps[5].max_concurrency: only a step with for_each has children to bound",
                "steps[5].tolerated_failures: only a step with for_each has children to fail",
                r#"steps[1].for_each: $output "split" is not a dependency of "a""#,
                r#"steps[2].for_each: $input "/one" is not a list"#,
                r#"steps[3].for_each: $input "/none" names no declared input (inputs: declares many, one)"#,
                "steps[4].for_each: must be a list, {$output: step, pointer: /json/pointer} or {$input: /json/pointer}",
                r#"steps[5].input.x: $item is the element of a map step's child; "e" has no for_each"#,
                "steps[6].for_each: a map runs over a list: $output or $input, not $artifact",
            ],
        );
        let long =
            format!("name: r\nsteps:\n  - {{name: a, operation: noop, for_each: {:?}}}\n", vec![0; MAX_MAP_ITEMS + 1]);
        assert_eq!(problems(&long), ["steps[0].for_each: 10001 elements; a map runs over at most 10000"]);
    }

    #[test]
    fn malformed_references_are_refused_at_their_field() {
        let p = problems(concat!(
            "name: r\nsteps:\n  - {name: a, operation: noop}\n",
            "  - {name: b, operation: noop, depends_on: [a], input: {t: [{$output: a, pointr: /x}], u: {$output: 1}, v: {$input: date}}}\n",
        ));
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(
            p[0].starts_with(r#"steps[1].input.t[0]: malformed $output reference (unknown key "pointr")"#),
            "{p:?}"
        );
        assert!(
            p[1].starts_with(r#"steps[1].input.u: malformed $output reference ("$output" must be a step name"#),
            "{p:?}"
        );
        assert!(
            p[2].starts_with(
                r#"steps[1].input.v: malformed $input reference (pointer "date" is not a JSON Pointer (RFC 6901)"#
            ),
            "{p:?}"
        );
    }

    #[test]
    fn a_valid_flow_plans_with_its_inputs_and_references_kept() {
        let yaml = concat!(
            "name: r\ninputs: {date: {type: string, default: '2026-12-04'}}\nsteps:\n",
            "  - {name: fetch, operation: noop}\n",
            "  - {name: summarise, operation: noop, depends_on: [fetch], input: {text: {$output: fetch, pointer: /body}, date: {$input: /date}}}\n",
        );
        let plan = WorkflowDefinition::parse(yaml, Format::Yaml).unwrap().plan(&config()).unwrap();
        assert_eq!(plan.inputs, serde_json::json!({"date": "2026-12-04"}));
        assert_eq!(
            plan.steps[1].input,
            serde_json::json!({"text": {"$output": "fetch", "pointer": "/body"}, "date": {"$input": "/date"}})
        );
        let plan = WorkflowDefinition::parse("name: r\nsteps: [{name: a, operation: noop}]\n", Format::Yaml)
            .unwrap()
            .plan(&config())
            .unwrap();
        assert_eq!(plan.inputs, serde_json::json!({}));
    }

    #[test]
    fn the_run_output_references_any_step_of_the_run() {
        let yaml = concat!(
            "name: r\ninputs: {date: {type: string}}\n",
            "output: {summary: {$output: b, pointer: /x}, file: {$artifact: a, name: f}, when: [{$input: /date}]}\n",
            "steps:\n  - {name: a, operation: noop}\n  - {name: b, operation: noop}\n",
        );
        let given = serde_json::json!({"date": "d"}).as_object().cloned().unwrap();
        let plan =
            WorkflowDefinition::parse(yaml, Format::Yaml).unwrap().plan_for(&config(), &given, |_, _| false).unwrap();
        assert_eq!(plan.output.as_ref().unwrap()["when"], serde_json::json!([{"$input": "/date"}]));
        // Any value: a bare reference too; `outputs:` is read as `output:`.
        let plan = WorkflowDefinition::parse(
            "name: r\noutputs: {$output: a, pointer: /n}\nsteps: [{name: a, operation: noop}]\n",
            Format::Yaml,
        )
        .unwrap()
        .plan(&config())
        .unwrap();
        assert_eq!(plan.output, Some(serde_json::json!({"$output": "a", "pointer": "/n"})));
        let p = problems(concat!(
            "name: r\noutput: {s: {$output: c}, t: {$input: /nope}, u: {$secret: api}, v: {$artifact: a}}\n",
            "steps:\n  - {name: a, operation: noop}\n",
        ));
        assert_eq!(p.len(), 4, "{p:?}");
        assert!(p.contains(&r#"output.s: $output "c" is not a step of the workflow"#.to_owned()), "{p:?}");
        assert!(
            p.contains(&r#"output.t: $input "/nope" names no declared input (inputs: declares none)"#.to_owned()),
            "{p:?}"
        );
        assert!(p.iter().any(|l| l.starts_with("output.u: a run output cannot be a secret reference")), "{p:?}");
        assert!(
            p.iter().any(|l| l.starts_with(r#"output.v: malformed $artifact reference ("name" is missing"#)),
            "{p:?}"
        );
    }

    #[test]
    fn run_inputs_hold_no_secrets_and_respect_the_size_limit() {
        let p = problems(concat!(
            "name: r\ninputs: {token: {type: object, default: {$secret: api}}, db: {type: object, default: {password: hunter2}}, list: {type: array, default: [{$secret: x}]}}\n",
            "steps:\n  - {name: a, operation: noop}\n",
        ));
        assert!(
            p.iter().any(|l| l.starts_with("inputs.db.default.password: looks like a secret (a password)")),
            "{p:?}"
        );
        assert!(
            p.iter().any(|l| l.starts_with("inputs.token.default: a run input cannot be a secret reference")),
            "{p:?}"
        );
        assert!(
            p.iter().any(|l| l.starts_with("inputs.list.default[0]: a run input cannot be a secret reference")),
            "{p:?}"
        );
        assert!(!p.join("\n").contains("hunter2"), "{p:?}");
        // A value given at submit is checked at the input's own path; its name counts (a
        // `password` input holds a password).
        let given = serde_json::json!({"password": "hunter2", "db": {"password": "hunter2"}});
        let def = WorkflowDefinition::parse(
            "name: r\ninputs: {password: {type: string}, db: {type: object}}\nsteps: [{name: a, operation: noop}]\n",
            Format::Yaml,
        )
        .unwrap();
        let p: Vec<String> = match def.plan_for(&config(), given.as_object().unwrap(), |_, _| false) {
            Err(Error::Invalid(p)) => p.iter().map(ToString::to_string).collect(),
            other => panic!("expected problems, got {other:?}"),
        };
        assert!(p.iter().any(|l| l.starts_with("inputs.password: looks like a secret (a password)")), "{p:?}");
        assert!(p.iter().any(|l| l.starts_with("inputs.db.password: looks like a secret (a password)")), "{p:?}");
        assert!(!p.join("\n").contains("hunter2"), "{p:?}");
        let mut c = config();
        c.max_input_bytes = 10;
        let def = WorkflowDefinition::parse(
            r#"{"name":"r","inputs":{"k":{"type":"string","default":"a long value"}},"steps":[{"name":"a","operation":"x"}]}"#,
            Format::Json,
        )
        .unwrap();
        let err = def.plan(&c).unwrap_err().to_string();
        assert!(err.contains("inputs: 20 bytes") && err.contains("RARA_MAX_INPUT_BYTES"), "{err}");
        let err = WorkflowDefinition::parse("name: r\ninputs: [1]\nsteps: []\n", Format::Yaml).unwrap_err();
        assert!(chain(&err).contains("inputs"), "{}", chain(&err));
    }

    proptest! {
        // Generated definitions that reach the planner: tests/workflow_planner.rs.
        /// Random DAG edges (only to earlier steps) always plan; adding a back edge is a cycle.
        #[test]
        fn forward_edges_plan_and_back_edges_cycle(edges in proptest::collection::vec((1usize..12, 0usize..12), 0..30)) {
            let n = 12;
            let mut steps: Vec<StepDefinition> = (0..n).map(|i| StepDefinition {
                name: format!("s{i}"), operation: "noop".into(), version: None, input: empty_object(),
                depends_on: vec![], ..Default::default()
            }).collect();
            for (a, b) in edges {
                let (from, to) = (a.max(b), a.min(b));
                let dep = format!("s{to}");
                if from != to && !steps[from].depends_on.contains(&dep) {
                    steps[from].depends_on.push(dep);
                }
            }
            let def = WorkflowDefinition { name: "p".into(), idempotency_key: None, inputs: Default::default(), output: None, steps };
            prop_assert!(def.plan(&config()).is_ok());
            let mut cyclic = def.clone();
            cyclic.steps[0].depends_on.push(format!("s{}", n - 1));
            cyclic.steps[n - 1].depends_on.push("s0".into());
            prop_assert!(matches!(cyclic.plan(&config()), Err(Error::Invalid(_))));
        }
    }
}
