//! A run's inputs (DESIGN.md "Data flow"): declared in the definition, given at submit.
//!
//! ```yaml
//! inputs:
//!   date: { type: string }                  # required: no default
//!   limit: { type: integer, default: 10 }   # optional
//!   tags: { type: array, default: [], description: "labels for the report" }
//! ```
//! Types are `string`, `number`, `integer`, `boolean`, `object` and `array`. [`resolve`] checks
//! the declarations and the values given (`rara submit --input`) against them: a required input
//! not given, a value or default of the wrong type, an input that is not declared, an unknown
//! type, each a [`Problem`](crate::workflow::Problem) at its path (`inputs.limit: expected integer, got a string`). A
//! message never holds a value (an input may be sensitive). The run's inputs are the values
//! given, or else the defaults.
//!
//! A plain value where a declaration belongs (`inputs: { date: "2026-12-01" }`, the form before
//! declarations) is refused with the declared form to write instead: a run input's value is
//! given at submit, or is its declaration's `default`.
//!
//! # Layout
//!
//! - this file: [`InputType`], [`RunInputs`] (what `$input` references read at submit), and
//!   the text of `rara submit --input` as a value ([`value_of_text`]).
//! - `resolve.rs`: the declarations and the given values checked, each problem at
//!   its path.

mod resolve;

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::workflow::references::INPUT_KEY;

pub use resolve::{replace, resolve};

/// The type of a run input, as JSON Schema spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputType {
    String,
    Number,
    Integer,
    Boolean,
    Object,
    Array,
}

impl InputType {
    pub const ALL: [InputType; 6] = [
        InputType::String,
        InputType::Number,
        InputType::Integer,
        InputType::Boolean,
        InputType::Object,
        InputType::Array,
    ];

    pub fn name(self) -> &'static str {
        match self {
            InputType::String => "string",
            InputType::Number => "number",
            InputType::Integer => "integer",
            InputType::Boolean => "boolean",
            InputType::Object => "object",
            InputType::Array => "array",
        }
    }

    pub fn parse(name: &str) -> Option<InputType> {
        InputType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Whether `value` is of this type; an integer is a number without a fractional part
    /// (`10` or `10.0`).
    pub fn admits(self, value: &Value) -> bool {
        match self {
            InputType::String => value.is_string(),
            InputType::Number => value.is_number(),
            InputType::Integer => {
                value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.is_finite() && f.fract() == 0.0)
            }
            InputType::Boolean => value.is_boolean(),
            InputType::Object => value.is_object(),
            InputType::Array => value.is_array(),
        }
    }
}

impl std::fmt::Display for InputType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The declared type of the input `name` in a definition's `inputs:`, if it declares one.
pub fn declared_type(declared: &Map<String, Value>, name: &str) -> Option<InputType> {
    declared.get(name)?.get("type")?.as_str().and_then(InputType::parse)
}

/// The value of `rara submit --input KEY=TEXT` for an input of type `ty` (`None`: not
/// declared): the text itself for a string, else the text as JSON when it parses, else the
/// text as a string (which the type check then refuses if the type is not `string`).
pub fn value_of_text(ty: Option<InputType>, text: &str) -> Value {
    match ty {
        Some(InputType::String) => Value::String(text.to_owned()),
        _ => serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned())),
    }
}

/// The run's inputs as submit resolved them: every value (given or default) and every
/// declared type, for the references that read them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunInputs {
    /// An object: the input's name to its value. A required input that was not given is
    /// absent (and a problem).
    pub values: Value,
    /// Every declared input, with its type (`None`: the declaration is a problem of its own).
    pub types: BTreeMap<String, Option<InputType>>,
}

impl RunInputs {
    /// Why `{"$input": pointer}` cannot be read at submit, or `None`: its first token must name
    /// a declared input, and what it points to must be in the value when one is known.
    pub(crate) fn check_pointer(&self, pointer: &str) -> Option<String> {
        let Some(name) = first_token(pointer) else {
            return None; // "": the whole inputs object.
        };
        if !self.types.contains_key(&name) {
            let declared: Vec<&str> = self.types.keys().map(String::as_str).collect();
            let declared = if declared.is_empty() { "none".to_owned() } else { declared.join(", ") };
            return Some(format!("{} {pointer:?} names no declared input (inputs: declares {declared})", INPUT_KEY));
        }
        match self.values.get(&name) {
            // A required input not given: already a problem of its own.
            None => None,
            Some(_) if self.values.pointer(pointer).is_some() => None,
            Some(_) => Some(format!("{} {pointer:?} finds nothing in the run's inputs", INPUT_KEY)),
        }
    }

    /// Whether `{"$input": pointer}` is known at submit not to be a list, and why.
    pub(crate) fn not_a_list(&self, pointer: &str) -> Option<String> {
        let key = INPUT_KEY;
        match self.values.pointer(pointer) {
            Some(value) if !value.is_array() => Some(format!("{key} {pointer:?} is not a list")),
            Some(_) => None,
            // Not given (required): its declaration says.
            None => first_token(pointer)
                .filter(|name| pointer == format!("/{}", name.replace('~', "~0").replace('/', "~1")))
                .and_then(|name| self.types.get(&name).copied().flatten())
                .filter(|ty| *ty != InputType::Array)
                .map(|ty| format!("{key} {pointer:?} is not a list (it is declared {ty})")),
        }
    }
}

/// The first token of a JSON Pointer, unescaped; `None` for `""`.
fn first_token(pointer: &str) -> Option<String> {
    let rest = pointer.strip_prefix('/')?;
    let token = rest.split('/').next().unwrap_or_default();
    Some(token.replace("~1", "/").replace("~0", "~"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;
    use crate::config::Config;
    use crate::workflow::{Error, Format, WorkflowDefinition};

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn command_line_text_is_json_when_it_parses_and_the_text_for_a_string_input() {
        assert_eq!(value_of_text(None, "10"), json!(10));
        assert_eq!(value_of_text(Some(InputType::Integer), "10"), json!(10));
        assert_eq!(value_of_text(Some(InputType::Array), r#"["a", 1]"#), json!(["a", 1]));
        assert_eq!(value_of_text(Some(InputType::Boolean), "true"), json!(true));
        assert_eq!(value_of_text(Some(InputType::Number), "2026-12-02"), json!("2026-12-02"));
        assert_eq!(value_of_text(Some(InputType::String), "10"), json!("10"));
        assert_eq!(value_of_text(Some(InputType::String), r#""q""#), json!(r#""q""#));
        assert_eq!(value_of_text(None, "null"), Value::Null);
    }

    #[test]
    fn references_read_declared_inputs_and_a_map_only_an_array() {
        let config = Config::from_lookup("test", |_| None).unwrap();
        let yaml = concat!(
            "name: r\ninputs: {items: {type: array}, one: {type: string}, obj: {type: object, default: {list: [1], n: 2}}}\n",
            "steps:\n",
            "  - {name: a, operation: noop, for_each: {$input: /items}, input: {x: {$input: /one}}}\n",
            "  - {name: b, operation: noop, for_each: {$input: /one}}\n",
            "  - {name: c, operation: noop, for_each: {$input: /obj/list}}\n",
            "  - {name: d, operation: noop, for_each: {$input: /obj/n}, input: {y: {$input: /obj/m}, z: {$input: /nope}}}\n",
        );
        let definition = WorkflowDefinition::parse(yaml, Format::Yaml).unwrap();
        // Required inputs not given: the references to them still check against their types.
        let problems: Vec<String> = match definition.plan(&config) {
            Err(Error::Invalid(p)) => p.iter().map(ToString::to_string).collect(),
            other => panic!("expected problems, got {other:?}"),
        };
        assert_eq!(
            problems,
            [
                "inputs.items: required (it has no default) and not given: rara submit --input items=VALUE",
                "inputs.one: required (it has no default) and not given: rara submit --input one=VALUE",
                r#"steps[1].for_each: $input "/one" is not a list (it is declared string)"#,
                r#"steps[3].for_each: $input "/obj/n" is not a list"#,
                r#"steps[3].input.y: $input "/obj/m" finds nothing in the run's inputs"#,
                r#"steps[3].input.z: $input "/nope" names no declared input (inputs: declares items, obj, one)"#,
            ]
        );
        let fixed = yaml.replace("/obj/n}, input: {y: {$input: /obj/m}, z: {$input: /nope}}", "/obj/list}");
        let fixed = fixed.replace("for_each: {$input: /one}", "for_each: {$input: /items}");
        let given = object(json!({"items": [1, 2], "one": "x"}));
        let plan =
            WorkflowDefinition::parse(&fixed, Format::Yaml).unwrap().plan_for(&config, &given, |_, _| false).unwrap();
        assert_eq!(plan.inputs, json!({"items": [1, 2], "one": "x", "obj": {"list": [1], "n": 2}}));

        // A bad declaration is one problem: the references to it are not refused again.
        let yaml = "name: r\ninputs: {when: {type: datetime}, day: monday}\nsteps: [{name: a, operation: noop, for_each: {$input: /when}, input: {d: {$input: /day}}}]\n";
        let problems: Vec<String> = match WorkflowDefinition::parse(yaml, Format::Yaml).unwrap().plan(&config) {
            Err(Error::Invalid(p)) => p.iter().map(|p| p.path.clone()).collect(),
            other => panic!("expected problems, got {other:?}"),
        };
        assert_eq!(problems, ["inputs.day", "inputs.when.type"]);
    }
}
