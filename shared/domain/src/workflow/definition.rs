//! The definition as written (JSON or YAML): the run, its steps and their retry settings, parsed
//! strictly (an unknown field is an error).

use serde::{Deserialize, Serialize};

use crate::flow::ConcurrencySpec;
use crate::wait::WaitSpec;
use crate::workflow::child::ChildRunSpec;
use crate::workflow::problem::Error;

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
    /// The run's deadline, from its submission: a run still running then is cancelled with
    /// `RUN_TIMED_OUT` (1 s to [`MAX_RUN_TIMEOUT_SECONDS`](crate::workflow::MAX_RUN_TIMEOUT_SECONDS)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    pub steps: Vec<StepDefinition>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepDefinition {
    pub name: String,
    /// The executor the step runs with; empty for a step that waits or runs a child workflow.
    #[serde(default)]
    pub operation: String,
    #[serde(default)]
    pub version: Option<String>,
    /// A durable wait instead of an operation (a timer, a signal, an event: [`crate::wait`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<WaitSpec>,
    /// A child workflow instead of an operation: a registered workflow run and waited for
    /// ([`crate::workflow::child`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<ChildRunSpec>,
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

pub(crate) fn empty_object() -> serde_json::Value {
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

impl WorkflowDefinition {
    /// Parses a definition; unknown fields are errors.
    pub fn parse(text: &str, format: Format) -> Result<Self, Error> {
        Ok(match format {
            Format::Json => serde_json::from_str(text)?,
            Format::Yaml => serde_saphyr::from_str(text)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::problem::testing::chain;

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
}
