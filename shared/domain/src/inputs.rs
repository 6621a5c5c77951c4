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
//! type, each a [`Problem`] at its path (`inputs.limit: expected integer, got a string`). A
//! message never holds a value (an input may be sensitive). The run's inputs are the values
//! given, or else the defaults.
//!
//! A plain value where a declaration belongs (`inputs: { date: "2026-12-01" }`, the form before
//! declarations) is refused with the declared form to write instead: a run input's value is
//! given at submit, or is its declaration's `default`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::references;
use crate::secret_material::{self, push_key};
use crate::workflow::Problem;

/// What a declaration may hold.
const KEYS: [&str; 3] = ["type", "default", "description"];

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
            return Some(format!(
                "{} {pointer:?} names no declared input (inputs: declares {declared})",
                references::INPUT_KEY
            ));
        }
        match self.values.get(&name) {
            // A required input not given: already a problem of its own.
            None => None,
            Some(_) if self.values.pointer(pointer).is_some() => None,
            Some(_) => Some(format!("{} {pointer:?} finds nothing in the run's inputs", references::INPUT_KEY)),
        }
    }

    /// Whether `{"$input": pointer}` is known at submit not to be a list, and why.
    pub(crate) fn not_a_list(&self, pointer: &str) -> Option<String> {
        let key = references::INPUT_KEY;
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

/// The run's inputs from the definition's declarations (`declared`, its `inputs:`) and the
/// values given at submit; each thing wrong is a problem at its path under `inputs`.
pub fn resolve(declared: &Map<String, Value>, given: &Map<String, Value>, problems: &mut Vec<Problem>) -> RunInputs {
    let mut problem = |path: String, message: String| problems.push(Problem { path, message });
    let mut inputs = RunInputs { values: Value::Object(Map::new()), types: BTreeMap::new() };
    let mut values = Map::new();
    for (name, declaration) in declared {
        let path = at(name);
        inputs.types.insert(name.clone(), None);
        let Some(declaration) = declaration.as_object().filter(|d| d.contains_key("type")) else {
            let form = format!(
                "declare it as {{type: string}} (required) or {{type: integer, default: 10}}; its value is given at \
                 submit (rara submit --input {name}=VALUE) or is the declaration's default"
            );
            let message = match declaration {
                Value::Object(_) => format!("\"type\" is missing: {form}"),
                _ => format!("a run input is declared, not given a value here: {form}"),
            };
            problem(path, message);
            continue;
        };
        if let Some(extra) = declaration.keys().find(|k| !KEYS.contains(&k.as_str())) {
            let mut field = path.clone();
            push_key(&mut field, extra);
            problem(field, format!("unknown key {extra:?}; a declaration holds {}", KEYS.join(", ")));
        }
        if declaration.get("description").is_some_and(|d| !d.is_string()) {
            problem(format!("{path}.description"), "must be a string".into());
        }
        let type_names = || InputType::ALL.map(InputType::name).join(", ");
        let ty = match &declaration["type"] {
            Value::String(t) => match InputType::parse(t) {
                Some(ty) => ty,
                None => {
                    problem(format!("{path}.type"), format!("unknown type {t:?}; one of {}", type_names()));
                    continue;
                }
            },
            _ => {
                problem(format!("{path}.type"), format!("must be a type name: one of {}", type_names()));
                continue;
            }
        };
        inputs.types.insert(name.clone(), Some(ty));
        let default = declaration.get("default");
        if let Some(default) = default {
            if !ty.admits(default) {
                problem(format!("{path}.default"), mismatch(ty, default));
            }
            check_material(name, default, "default", &mut problem);
        }
        match (given.get(name), default) {
            (Some(value), _) => {
                if !ty.admits(value) {
                    problem(path.clone(), mismatch(ty, value));
                }
                check_material(name, value, "", &mut problem);
                values.insert(name.clone(), value.clone());
            }
            (None, Some(default)) => {
                values.insert(name.clone(), default.clone());
            }
            (None, None) => {
                problem(path, format!("required (it has no default) and not given: rara submit --input {name}=VALUE"))
            }
        }
    }
    for name in given.keys().filter(|name| !declared.contains_key(*name)) {
        let names: Vec<&str> = declared.keys().map(String::as_str).collect();
        let names = if names.is_empty() { "none".to_owned() } else { names.join(", ") };
        problem(at(name), format!("not a declared input (inputs: declares {names})"));
    }
    inputs.values = Value::Object(values);
    inputs
}

/// `inputs.name` (`inputs["a b"]`), spelled like every field path.
fn at(name: &str) -> String {
    let mut path = "inputs".to_owned();
    push_key(&mut path, name);
    path
}

/// `expected integer, got a string`: the value's kind, never the value.
fn mismatch(ty: InputType, value: &Value) -> String {
    let got = match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) if ty == InputType::Integer => "a number with a fractional part",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    format!("expected {ty}, got {got}")
}

/// An input's value (`field` ""), or its declaration's `default`, holds no secret material and
/// no secret reference (secrets never flow through references).
fn check_material(name: &str, value: &Value, field: &str, problem: &mut impl FnMut(String, String)) {
    let mut head = String::new();
    push_key(&mut head, name);
    let wrapped = Value::Object(Map::from_iter([(name.to_owned(), value.clone())]));
    // A finding's path starts with the input's name (`token`, `db.password`): the name keeps the
    // field's meaning (a `password` input is a password).
    let path = |found: &str| {
        let mut path = at(name);
        if !field.is_empty() {
            path.push('.');
            path.push_str(field);
        }
        path.push_str(&found[head.len().min(found.len())..]);
        path
    };
    for finding in secret_material::scan(&wrapped) {
        problem(path(&finding.path), finding.kind.to_string());
    }
    for found in references::secret_references(&wrapped) {
        problem(
            path(&found),
            "a run input cannot be a secret reference (secrets never flow through references); reference the \
             secret in the step's input"
                .into(),
        );
    }
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

    /// `resolve`'s problems as `path: message` lines, and the resolved values.
    fn resolved(declared: Value, given: Value) -> (Vec<String>, Value) {
        let mut problems = Vec::new();
        let inputs = resolve(&object(declared), &object(given), &mut problems);
        (problems.iter().map(ToString::to_string).collect(), inputs.values)
    }

    #[test]
    fn given_values_override_defaults_and_required_inputs_must_be_given() {
        let declared = json!({
            "date": {"type": "string"},
            "limit": {"type": "integer", "default": 10, "description": "how many"},
            "ratio": {"type": "number", "default": 0.5},
            "tags": {"type": "array", "default": []},
        });
        let (problems, values) = resolved(declared.clone(), json!({"date": "2026-12-02", "ratio": 2}));
        assert_eq!(problems, Vec::<String>::new());
        assert_eq!(values, json!({"date": "2026-12-02", "limit": 10, "ratio": 2, "tags": []}));
        let (problems, values) = resolved(declared, json!({"limit": 10.0}));
        assert_eq!(
            problems,
            [r#"inputs.date: required (it has no default) and not given: rara submit --input date=VALUE"#]
        );
        assert_eq!(values, json!({"limit": 10.0, "ratio": 0.5, "tags": []}), "an integer may be spelled 10.0");
    }

    #[test]
    fn each_bad_declaration_or_value_is_a_problem_at_its_path_without_the_value() {
        let (problems, _) = resolved(
            json!({
                "date": "2026-12-01",
                "who": {"name": "ada"},
                "limit": {"type": "integer", "default": "ten"},
                "ratio": {"type": "number", "defualt": 1},
                "when": {"type": "datetime"},
                "flag": {"type": 1},
                "n": {"type": "integer", "description": 3},
                "a b": {"type": "boolean"},
                "list": {"type": "array"},
            }),
            json!({"n": 1.5, "a b": "yes", "list": {"x": "secret-ish"}, "colour": "crimson"}),
        );
        let form = "declare it as {type: string} (required) or {type: integer, default: 10}; its value is given at \
                    submit (rara submit --input NAME=VALUE) or is the declaration's default";
        let types = "string, number, integer, boolean, object, array";
        let mut expected = vec![
            format!("inputs.date: a run input is declared, not given a value here: {}", form.replace("NAME", "date")),
            format!("inputs.who: \"type\" is missing: {}", form.replace("NAME", "who")),
            "inputs.limit.default: expected integer, got a string".to_owned(),
            r#"inputs.ratio.defualt: unknown key "defualt"; a declaration holds type, default, description"#.to_owned(),
            "inputs.ratio: required (it has no default) and not given: rara submit --input ratio=VALUE".to_owned(),
            format!(r#"inputs.when.type: unknown type "datetime"; one of {types}"#),
            format!("inputs.flag.type: must be a type name: one of {types}"),
            "inputs.n.description: must be a string".to_owned(),
            "inputs.n: expected integer, got a number with a fractional part".to_owned(),
            r#"inputs["a b"]: expected boolean, got a string"#.to_owned(),
            "inputs.list: expected array, got an object".to_owned(),
            r#"inputs.colour: not a declared input (inputs: declares a b, date, flag, limit, list, n, ratio, when, who)"#
                .to_owned(),
        ];
        let mut problems = problems;
        problems.sort();
        expected.sort();
        assert_eq!(problems, expected);
        let all = problems.join("\n");
        for value in ["2026-12-01", "ada", "ten", "yes", "secret-ish", "crimson"] {
            assert!(!all.contains(value), "{value} echoed: {all}");
        }
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
