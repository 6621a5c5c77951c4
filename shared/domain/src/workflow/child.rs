//! Child workflows (docs/src/guide/recover.md "Child workflows"): a step that runs a registered
//! workflow and waits for it.
//!
//! ```yaml
//! - name: evaluate
//!   depends_on: [train]
//!   run: { workflow: eval-suite, version: "3", inputs: { model: { $output: train, pointer: /uri } } }
//! ```
//!
//! Planned, such a step runs the reserved operation [`CHILD_OPERATION`] with the input
//! `{"workflow": NAME, "version": N | null, "inputs": {...}}` ([`ChildInput`]): its references are
//! substituted at claim like any input's (a map over children substitutes `$item` in each), and
//! the executor that claims it makes the child run (keyed by [`child_key`]: one per parent
//! attempt) and lets the step wait for it, holding nothing. The scheduler ends the wait when the
//! child ends: the step succeeds with the child's outputs, or fails with `CHILD_WORKFLOW_FAILED`.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::workflow::limits::MAX_NAME_LEN;

/// The operation a step with `run:` runs: handled by the runtime itself, never registered.
pub const CHILD_OPERATION: &str = "workflow.run";

/// How deep child workflows may nest (a run's child is at depth 1).
pub const MAX_CHILD_DEPTH: u32 = 8;

/// `run:` as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChildRunSpec {
    /// The registered workflow's name (`rara workflow register`).
    pub workflow: String,
    /// Its version: a number (`3` or `"3"`), or `latest` / left out for the newest when the
    /// child is made.
    #[serde(default, deserialize_with = "version_of", skip_serializing_if = "Option::is_none")]
    pub version: Option<i32>,
    /// The child run's inputs; references to the parent's steps and inputs are substituted when
    /// the step is claimed.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub inputs: Value,
}

/// What a planned child step's input holds, references substituted at claim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildInput {
    pub workflow: String,
    pub version: Option<i32>,
    pub inputs: serde_json::Map<String, Value>,
}

impl ChildRunSpec {
    /// The planned step's input, or why the spec is wrong: (field under `run`, message).
    pub fn plan(&self) -> Result<Value, (&'static str, String)> {
        if self.workflow.is_empty() || self.workflow.len() > MAX_NAME_LEN {
            return Err(("workflow", format!("a workflow name is 1 to {MAX_NAME_LEN} characters")));
        }
        let inputs = match &self.inputs {
            Value::Null => Value::Object(Default::default()),
            Value::Object(_) => self.inputs.clone(),
            _ => return Err(("inputs", "must be an object".into())),
        };
        Ok(serde_json::json!({"workflow": self.workflow, "version": self.version, "inputs": inputs}))
    }
}

impl ChildInput {
    /// The input a claimed child step runs with, or why it is not one (a step written with
    /// `operation: workflow.run` by hand is refused at submit, so this is rare).
    pub fn parse(input: &Value) -> Result<Self, String> {
        serde_json::from_value(input.clone()).map_err(|e| format!("not the input of a child workflow step: {e}"))
    }
}

/// The idempotency key of the child run made for `attempt` of the parent step `step_id`: a
/// second claim of the same attempt (a redelivery, a crash after the child was made) finds it.
pub fn child_key(step_id: Uuid, attempt: u32) -> String {
    format!("child:{step_id}:{attempt}")
}

/// `3`, `"3"`, `"latest"` or nothing.
fn version_of<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i32>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Written {
        Number(i64),
        Text(String),
    }
    let bad = || serde::de::Error::custom("run.version is a number from 1, or \"latest\"");
    match Option::<Written>::deserialize(deserializer)? {
        None => Ok(None),
        Some(Written::Text(t)) if t == "latest" => Ok(None),
        Some(Written::Text(t)) => t.parse::<i32>().ok().filter(|v| *v > 0).map(Some).ok_or_else(bad),
        Some(Written::Number(n)) => i32::try_from(n).ok().filter(|v| *v > 0).map(Some).ok_or_else(bad),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> Result<ChildRunSpec, String> {
        serde_saphyr::from_str(yaml).map_err(|e| e.to_string())
    }

    #[test]
    fn the_version_is_a_number_a_numeric_string_or_latest() {
        assert_eq!(spec("workflow: w\nversion: \"3\"").unwrap().version, Some(3));
        assert_eq!(spec("workflow: w\nversion: 4").unwrap().version, Some(4));
        assert_eq!(spec("workflow: w\nversion: latest").unwrap().version, None);
        assert_eq!(spec("workflow: w").unwrap().version, None);
        for bad in ["0", "\"x\"", "-2", "99999999999"] {
            let err = spec(&format!("workflow: w\nversion: {bad}")).unwrap_err();
            assert!(err.contains("run.version"), "{bad}: {err}");
        }
        assert!(spec("workflow: w\ncolour: red").unwrap_err().contains("colour"));
    }

    #[test]
    fn planned_input_round_trips_through_the_claimed_form() {
        let spec = spec("workflow: eval\nversion: 2\ninputs: { model: { $output: train, pointer: /uri } }").unwrap();
        let input = spec.plan().unwrap();
        let parsed = ChildInput::parse(&input).unwrap();
        assert_eq!((parsed.workflow.as_str(), parsed.version), ("eval", Some(2)));
        assert!(parsed.inputs["model"].get("$output").is_some());
        let mut empty = spec.clone();
        empty.workflow.clear();
        assert_eq!(empty.plan().unwrap_err().0, "workflow");
        let mut listed = spec;
        listed.inputs = serde_json::json!([1]);
        assert_eq!(listed.plan().unwrap_err().0, "inputs");
        assert!(ChildInput::parse(&serde_json::json!({"workflow": 1})).is_err());
    }

    #[test]
    fn one_key_per_parent_attempt() {
        let id = Uuid::nil();
        assert_ne!(child_key(id, 1), child_key(id, 2));
        assert_eq!(child_key(id, 1), format!("child:{id}:1"));
    }
}
