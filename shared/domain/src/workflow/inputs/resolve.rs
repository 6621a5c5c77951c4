//! [`resolve`]: a definition's input declarations and the values given at submit, checked.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::human;
use crate::secret_material::{self, push_key};
use crate::workflow::inputs::{InputType, RunInputs};
use crate::workflow::problem::Problem;
use crate::workflow::references::secret_references;

/// What a declaration may hold.
const KEYS: [&str; 3] = ["type", "default", "description"];

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

/// A rerun's inputs (`rara rerun --input`): the run's `original` inputs (as submit resolved
/// them) with the `given` ones replaced. The run keeps no definition, so a given input must be
/// one the original has, of the same JSON kind, holding no secret; the whole within
/// `max_bytes` (`RARA_MAX_INPUT_BYTES`). Each thing wrong is a problem at its path. Inputs the
/// run keeps by reference (`{"$stored": …}`) are kept whole: none may be replaced.
pub fn replace(original: &Value, given: &Map<String, Value>, max_bytes: usize) -> Result<Value, Vec<Problem>> {
    if let (Some(stored), false) = (crate::stored::Descriptor::of(original), given.is_empty()) {
        let message = format!(
            "the run's inputs are in the artifact store ({} bytes, {}): a rerun keeps them whole and \
             cannot replace one; submit a new run",
            stored.size_bytes, stored.digest
        );
        return Err(vec![Problem { path: "inputs".into(), message }]);
    }
    let mut problems = Vec::new();
    let mut values = original.as_object().cloned().unwrap_or_default();
    for (name, value) in given {
        let mut problem = |path: String, message: String| problems.push(Problem { path, message });
        match values.get(name) {
            None => problem(at(name), format!("the run has no input {name:?}: a rerun replaces the inputs it had")),
            Some(old) if std::mem::discriminant(old) != std::mem::discriminant(value) => {
                problem(at(name), format!("{} like the original's, got {}", human::kind(old), human::kind(value)))
            }
            Some(_) => check_material(name, value, "", &mut problem),
        }
        values.insert(name.clone(), value.clone());
    }
    let values = Value::Object(values);
    let bytes = values.to_string().len();
    if bytes > max_bytes {
        problems.push(Problem {
            path: "inputs".into(),
            message: format!("{bytes} bytes; at most {max_bytes} are allowed (RARA_MAX_INPUT_BYTES)"),
        });
    }
    if problems.is_empty() { Ok(values) } else { Err(problems) }
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
    for found in secret_references(&wrapped) {
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

    #[test]
    fn a_rerun_replaces_inputs_the_run_has_with_values_of_their_kind() {
        let original = json!({"date": "2026-12-01", "n": 3});
        let replaced = replace(&original, &object(json!({"date": "2026-12-02"})), 1024).unwrap();
        assert_eq!(replaced, json!({"date": "2026-12-02", "n": 3}));
        let problems = replace(&original, &object(json!({"dat": "x", "n": "3"})), 1024).unwrap_err();
        let said: Vec<String> = problems.iter().map(|p| format!("{}: {}", p.path, p.message)).collect();
        assert_eq!(
            said,
            vec![
                "inputs.dat: the run has no input \"dat\": a rerun replaces the inputs it had",
                "inputs.n: a number like the original's, got a string",
            ]
        );
        let secret = replace(&json!({"opts": {}}), &object(json!({"opts": {"token": {"$secret": "x"}}})), 1024);
        assert!(secret.unwrap_err()[0].message.contains("secret reference"), "a secret reference is refused");
        let big = replace(&original, &object(json!({"date": "x".repeat(2000)})), 1024).unwrap_err();
        assert!(big[0].message.contains("RARA_MAX_INPUT_BYTES"), "{big:?}");
        // Inputs kept by reference: kept whole, none replaced.
        let d = crate::stored::Descriptor {
            uri: "s3://b/k".into(),
            size_bytes: 9,
            digest: "sha256:0".into(),
            media_type: None,
        };
        assert_eq!(replace(&d.reference(), &Map::new(), 1024).unwrap(), d.reference());
        let refused = replace(&d.reference(), &object(json!({"date": "x"})), 1024).unwrap_err();
        assert!(refused[0].message.contains("cannot replace one"), "{refused:?}");
    }

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
}
