//! Registered definitions (`rara workflow register`): how one is named
//! ([`WorkflowRef`], `NAME[@VERSION]`) and the checks a definition passes to be registered,
//! which are submit's ([`WorkflowDefinition::check_for_register`]).

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};

use crate::config::Config;
use crate::workflow::definition::WorkflowDefinition;
use crate::workflow::inputs::{self, InputType};
use crate::workflow::limits::MAX_NAME_LEN;
use crate::workflow::problem::Error;

/// A registered workflow by name, at a version or the newest (`NAME`, `NAME@latest`, `NAME@3`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowRef {
    pub name: String,
    /// `None`: the newest version at the time it is read.
    pub version: Option<i32>,
}

impl FromStr for WorkflowRef {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (name, version) = match text.rsplit_once('@') {
            None | Some((_, "latest")) => (text.trim_end_matches("@latest"), None),
            Some((name, v)) => match v.parse::<i32>() {
                Ok(v) if v > 0 => (name, Some(v)),
                _ => return Err(format!("{text:?}: the version after @ is a number from 1, or \"latest\"")),
            },
        };
        if name.is_empty() || name.len() > MAX_NAME_LEN {
            return Err(format!("{text:?}: a workflow name is 1 to {MAX_NAME_LEN} characters"));
        }
        Ok(WorkflowRef { name: name.to_owned(), version })
    }
}

impl fmt::Display for WorkflowRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.version {
            Some(v) => write!(f, "{}@{v}", self.name),
            None => write!(f, "{}@latest", self.name),
        }
    }
}

impl WorkflowDefinition {
    /// Submit's checks ([`plan_for`](Self::plan_for)) without the run's inputs: a required
    /// input stands in with a value of its declared type, so only what a submission could give
    /// is left open.
    pub fn check_for_register(
        &self,
        config: &Config,
        in_process: impl Fn(&str, Option<&str>) -> bool,
    ) -> Result<(), Error> {
        self.plan_for(config, &stand_ins(&self.inputs), in_process).map(|_| ())
    }
}

/// A value of its declared type for each declared input without a default.
fn stand_ins(declared: &Map<String, Value>) -> Map<String, Value> {
    let required = declared.iter().filter(|(_, d)| d.get("default").is_none());
    required
        .filter_map(|(name, _)| {
            let value = match inputs::declared_type(declared, name)? {
                InputType::String => Value::from(""),
                InputType::Number | InputType::Integer => Value::from(0),
                InputType::Boolean => Value::from(false),
                InputType::Object => Value::Object(Map::new()),
                InputType::Array => Value::Array(Vec::new()),
            };
            Some((name.clone(), value))
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_names_a_version_or_the_newest() {
        assert_eq!("nightly".parse(), Ok(WorkflowRef { name: "nightly".into(), version: None }));
        assert_eq!("nightly@latest".parse(), Ok(WorkflowRef { name: "nightly".into(), version: None }));
        assert_eq!("nightly@3".parse(), Ok(WorkflowRef { name: "nightly".into(), version: Some(3) }));
        assert!("nightly@0".parse::<WorkflowRef>().is_err());
        assert!("nightly@x".parse::<WorkflowRef>().is_err());
        assert!("@3".parse::<WorkflowRef>().is_err());
    }

    #[test]
    fn a_required_input_does_not_stop_a_registration_but_a_bad_step_does() {
        let config = Config::from_lookup("test", |_| None).unwrap();
        let text = "name: n\ninputs: {date: {type: string}, n: {type: integer}}\nsteps: [{name: a, operation: noop}]";
        let definition = WorkflowDefinition::parse(text, crate::workflow::Format::Yaml).unwrap();
        assert!(definition.plan(&config).is_err(), "submit without inputs refuses it");
        definition.check_for_register(&config, |_, _| true).unwrap();
        let bad = "name: n\nsteps: [{name: a, operation: noop, depends_on: [b]}]";
        let bad = WorkflowDefinition::parse(bad, crate::workflow::Format::Yaml).unwrap();
        assert!(bad.check_for_register(&config, |_, _| true).is_err());
    }
}
