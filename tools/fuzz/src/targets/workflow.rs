//! `workflow`: definition text → [`WorkflowDefinition::parse`] → [`WorkflowDefinition::plan_for`],
//! as `rara submit` and `POST /api/runs` do. Inputs: definitions generated valid (steps that
//! depend on earlier ones, references, maps, retry settings, concurrency keys, run inputs) and
//! the book's examples, then mutated at a node (replaced, removed, a field added) and written as
//! JSON or YAML, sometimes cut or with a character changed; and raw text. Invariants: no panic;
//! a refusal names a field path under the definition's fields; an accepted plan obeys every
//! limit (`shared/domain/src/workflow/limits.rs`, the configuration's), its dependencies form
//! a DAG of valid indices, and its retry policies decide without panicking.

mod generate;
mod invariants;

use proptest::prelude::*;
use rara_domain::config::Config;
use rara_domain::workflow::{Error, Format, WorkflowDefinition};
use serde_json::Value;

use crate::runner::Target;

/// The operations the target treats as in-process (their timeout must fit one invocation).
const IN_PROCESS: [&str; 2] = ["noop", "sleep"];

#[derive(Debug)]
pub struct Workflow {
    config: Config,
}

impl Workflow {
    /// The target with the default configuration (no `RARA_*` variable set).
    pub fn new() -> anyhow::Result<Self> {
        Ok(Self { config: Config::from_lookup("fuzz", |_| None)? })
    }
}

#[derive(Debug, Clone)]
pub struct Input {
    pub text: String,
    pub yaml: bool,
    /// The run inputs given at submit.
    pub given: serde_json::Map<String, Value>,
}

impl Target for Workflow {
    type Input = Input;

    fn name(&self) -> &'static str {
        "workflow"
    }

    fn inputs(&self) -> BoxedStrategy<Input> {
        generate::inputs().boxed()
    }

    fn check(&self, input: Input) -> Result<String, String> {
        let format = if input.yaml { Format::Yaml } else { Format::Json };
        let definition = match WorkflowDefinition::parse(&input.text, format) {
            Ok(definition) => definition,
            Err(Error::Json(_)) => return Ok("refused: not valid JSON".into()),
            Err(Error::Yaml(_)) => return Ok("refused: not valid YAML".into()),
            Err(Error::Invalid(problems)) => return Err(format!("parse returned problems: {problems:?}")),
        };
        let in_process = |operation: &str, _: Option<&str>| IN_PROCESS.contains(&operation);
        match definition.plan_for(&self.config, &input.given, in_process) {
            Ok(plan) => {
                invariants::plan_obeys_the_limits(&plan, &self.config, in_process)?;
                Ok(format!("accepted ({} steps)", if plan.steps.len() == 1 { "1" } else { "several" }))
            }
            Err(Error::Invalid(problems)) => invariants::refusal_names_fields(&problems),
            Err(other) => Err(format!("plan returned a parse error: {other}")),
        }
    }
}
