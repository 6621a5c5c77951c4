//! References in a step's input (DESIGN.md "Data flow"): a step takes values from the steps it
//! depends on and from the run's inputs.
//!
//! - `{"$output": "fetch"}`: the whole output of the step `fetch`;
//! - `{"$output": "fetch", "pointer": "/body"}`: the part of it at a JSON Pointer (RFC 6901);
//! - `{"$artifact": "fetch", "name": "report"}`: the descriptor of `fetch`'s artifact `report`
//!   (`uri`, `media_type`, `size_bytes`, `digest`);
//! - `{"$input": "/date"}`: the part of the run's inputs at a JSON Pointer;
//! - `{"$item": "/url"}`: in a map step's input (the template of its children's), the part of
//!   the child's element at a JSON Pointer (`""`: the whole element). A map child's input is
//!   substituted whole when its map is expanded ([`substitute_child`]).
//!
//! [`scan`] finds them with their field paths, and `check` is what submit refuses: a
//! malformed reference, a step that is not a dependency (direct or transitive), a run input
//! that is not there. [`substitute`] replaces them with the values found, at claim.
//!
//! A value brought in is data. It is not searched for references again, and an object in it
//! that holds `$secret` is escaped (the key gets one more `$`: `$$secret`), so a step's output
//! can never make a dependent resolve a secret: secrets never flow through references.

use std::collections::HashSet;

use serde_json::Value;

use crate::StepError;
use crate::inputs::RunInputs;
use crate::secret_material::{self, push_key};
use crate::step_error::codes;
use crate::workflow::{MAX_MAP_ITEMS, PlannedStep, Problem};

/// `{"$output": "step"}`, `{"$output": "step", "pointer": "/p"}`.
pub const OUTPUT_KEY: &str = "$output";
/// `{"$artifact": "step", "name": "artifact"}`.
pub const ARTIFACT_KEY: &str = "$artifact";
/// `{"$input": "/p"}`.
pub const INPUT_KEY: &str = "$input";
/// `{"$item": "/p"}`, in a map step's input.
pub const ITEM_KEY: &str = "$item";
/// The JSON Pointer of an `$output` reference.
pub const POINTER_KEY: &str = "pointer";
/// The artifact name of an `$artifact` reference.
pub const NAME_KEY: &str = "name";

/// One well-formed reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reference<'a> {
    Output { step: &'a str, pointer: Option<&'a str> },
    Artifact { step: &'a str, name: &'a str },
    Input { pointer: &'a str },
    Item { pointer: &'a str },
}

impl<'a> Reference<'a> {
    /// The upstream step it reads, if any.
    pub fn step(&self) -> Option<&'a str> {
        match *self {
            Reference::Output { step, .. } | Reference::Artifact { step, .. } => Some(step),
            Reference::Input { .. } | Reference::Item { .. } => None,
        }
    }

    pub fn key(&self) -> &'static str {
        match self {
            Reference::Output { .. } => OUTPUT_KEY,
            Reference::Artifact { .. } => ARTIFACT_KEY,
            Reference::Input { .. } => INPUT_KEY,
            Reference::Item { .. } => ITEM_KEY,
        }
    }
}

/// An object holding a reference key that is not a well-formed reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    pub key: &'static str,
    pub problem: String,
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let form = match self.key {
            OUTPUT_KEY => r#"{"$output": "step"} or {"$output": "step", "pointer": "/json/pointer"}"#,
            ARTIFACT_KEY => r#"{"$artifact": "step", "name": "artifact name"}"#,
            ITEM_KEY => r#"{"$item": "/json/pointer"}"#,
            _ => r#"{"$input": "/json/pointer"}"#,
        };
        write!(f, "malformed {} reference ({}); write {form}", self.key, self.problem)
    }
}

/// `Some` when `value` is an object holding `$output`, `$artifact`, `$input` or `$item` (and not
/// `$secret`, which is [`secret_material`]'s).
pub fn reference(value: &Value) -> Option<Result<Reference<'_>, Malformed>> {
    let object = value.as_object()?;
    if object.contains_key(secret_material::REFERENCE_KEY) {
        return None;
    }
    let mut kinds = [OUTPUT_KEY, ARTIFACT_KEY, INPUT_KEY, ITEM_KEY].into_iter().filter(|k| object.contains_key(*k));
    let key = kinds.next()?;
    let malformed = |problem: String| Some(Err(Malformed { key, problem }));
    if let Some(other) = kinds.next() {
        return malformed(format!("it also holds {other}; an object is one reference"));
    }
    let allowed: &[&str] = match key {
        OUTPUT_KEY => &[OUTPUT_KEY, POINTER_KEY],
        ARTIFACT_KEY => &[ARTIFACT_KEY, NAME_KEY],
        ITEM_KEY => &[ITEM_KEY],
        _ => &[INPUT_KEY],
    };
    if let Some(extra) = object.keys().find(|k| !allowed.contains(&k.as_str())) {
        return malformed(format!("unknown key {extra:?}"));
    }
    let text = |field: &str, what: &str| match object.get(field) {
        Some(Value::String(s)) if !s.is_empty() || [INPUT_KEY, ITEM_KEY, POINTER_KEY].contains(&field) => {
            Ok(s.as_str())
        }
        Some(_) => Err(format!("{field:?} must be {what}")),
        None => Err(format!("{field:?} is missing: {what}")),
    };
    let pointer = |field: &str| {
        let p = text(field, "a JSON Pointer (a string)")?;
        check_pointer(p).map(|()| p)
    };
    let parsed = match key {
        OUTPUT_KEY => text(OUTPUT_KEY, "a step name (a non-empty string)").and_then(|step| {
            let pointer = if object.contains_key(POINTER_KEY) { Some(pointer(POINTER_KEY)?) } else { None };
            Ok(Reference::Output { step, pointer })
        }),
        ARTIFACT_KEY => text(ARTIFACT_KEY, "a step name (a non-empty string)").and_then(|step| {
            let name = text(NAME_KEY, "the artifact's name (a non-empty string)")?;
            Ok(Reference::Artifact { step, name })
        }),
        ITEM_KEY => pointer(ITEM_KEY).map(|pointer| Reference::Item { pointer }),
        _ => pointer(INPUT_KEY).map(|pointer| Reference::Input { pointer }),
    };
    Some(parsed.map_err(|problem| Malformed { key, problem }))
}

/// RFC 6901: empty (the whole value), or `/`-separated tokens where `~` is only `~0` or `~1`.
fn check_pointer(pointer: &str) -> Result<(), String> {
    if !pointer.is_empty() && !pointer.starts_with('/') {
        return Err(format!(
            "pointer {pointer:?} is not a JSON Pointer (RFC 6901): it must be empty or start with \"/\""
        ));
    }
    let mut chars = pointer.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return Err(format!(
                "pointer {pointer:?} is not a JSON Pointer (RFC 6901): \"~\" must be followed by 0 or 1"
            ));
        }
    }
    Ok(())
}

/// A reference (or a malformed one) at a path relative to the scanned value (`text`,
/// `items[2].url`), spelled like [`secret_material::Finding`]'s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found<'a> {
    pub path: String,
    pub reference: Result<Reference<'a>, Malformed>,
}

/// Every reference of `input`, in document order. A secret reference is not one.
pub fn scan(input: &Value) -> Vec<Found<'_>> {
    let mut found = Vec::new();
    walk(input, &mut String::new(), &mut |path, reference| {
        found.push(Found { path: path.to_owned(), reference });
    });
    found
}

fn walk<'a>(value: &'a Value, path: &mut String, found: &mut impl FnMut(&str, Result<Reference<'a>, Malformed>)) {
    visit(value, path, &mut |path, value| match reference(value) {
        Some(reference) => {
            found(path, reference);
            false
        }
        // A `$secret` reference is the secrets' business: nothing below it is looked at.
        None => !value.as_object().is_some_and(|o| o.contains_key(secret_material::REFERENCE_KEY)),
    });
}

/// Calls `enter` on `value` and, while it answers `true`, on every value below it, each with
/// its field path (as [`scan`]'s).
fn visit<'a>(value: &'a Value, path: &mut String, enter: &mut impl FnMut(&str, &'a Value) -> bool) {
    if !enter(path, value) {
        return;
    }
    match value {
        Value::Object(object) => {
            for (key, child) in object {
                let len = path.len();
                push_key(path, key);
                visit(child, path, enter);
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                visit(child, path, enter);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// `prefix.path`, or `prefix[0]` when the path starts with an index.
fn join(prefix: &str, path: &str) -> String {
    match path {
        "" => prefix.to_owned(),
        p if p.starts_with('[') => format!("{prefix}{p}"),
        p => format!("{prefix}.{p}"),
    }
}

/// What submit refuses in the references of `steps` (validated otherwise, dependencies as
/// indices) given the run's `inputs`: one problem per reference, at its field path.
pub(crate) fn check(steps: &[PlannedStep], inputs: &RunInputs) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let found = scan(&step.input);
        if found.is_empty() && step.map.is_none() {
            continue;
        }
        let upstream = ancestors(steps, i);
        if let Some(map) = &step.map {
            problems.extend(check_for_each(&map.items, &step.name, &upstream, inputs, &format!("steps[{i}].for_each")));
        }
        for Found { path, reference } in found {
            let path = join(&format!("steps[{i}].input"), &path);
            let message = match reference {
                Err(malformed) => malformed.to_string(),
                Ok(r @ (Reference::Output { step: name, .. } | Reference::Artifact { step: name, .. })) => {
                    if upstream.contains(name) {
                        continue;
                    }
                    format!("{} {name:?} is not a dependency of {:?}", r.key(), step.name)
                }
                Ok(Reference::Input { pointer }) => match inputs.check_pointer(pointer) {
                    None => continue,
                    Some(message) => message,
                },
                Ok(Reference::Item { .. }) => {
                    if step.map.is_some() {
                        continue;
                    }
                    format!("{ITEM_KEY} is the element of a map step's child; {:?} has no for_each", step.name)
                }
            };
            problems.push(Problem { path, message });
        }
    }
    problems
}

/// What submit refuses in a map step's `for_each` (at `path`): anything but a list, a
/// `$output` reference to a step it depends on, or a `$input` reference to a list of the run's
/// inputs (an input declared `array`, or a part of one that is a list); a literal or input list
/// longer than [`MAX_MAP_ITEMS`].
fn check_for_each(items: &Value, step: &str, upstream: &HashSet<&str>, inputs: &RunInputs, path: &str) -> Vec<Problem> {
    let too_long = |list: &Value| {
        list.as_array()
            .filter(|l| l.len() > MAX_MAP_ITEMS)
            .map(|l| format!("{} elements; a map runs over at most {MAX_MAP_ITEMS}", l.len()))
    };
    let message = match reference(items) {
        None if items.is_array() => too_long(items),
        None => Some(format!(
            "must be a list, {{{OUTPUT_KEY}: step, {POINTER_KEY}: /json/pointer}} or {{{INPUT_KEY}: /json/pointer}}"
        )),
        Some(Err(malformed)) => Some(malformed.to_string()),
        Some(Ok(Reference::Output { step: name, .. })) if upstream.contains(name) => None,
        Some(Ok(Reference::Output { step: name, .. })) => {
            Some(format!("{OUTPUT_KEY} {name:?} is not a dependency of {step:?}"))
        }
        Some(Ok(Reference::Input { pointer })) => inputs
            .check_pointer(pointer)
            .or_else(|| inputs.not_a_list(pointer))
            .or_else(|| inputs.values.pointer(pointer).and_then(too_long)),
        Some(Ok(r)) => Some(format!("a map runs over a list: {OUTPUT_KEY} or {INPUT_KEY}, not {}", r.key())),
    };
    message.map(|message| Problem { path: path.to_owned(), message }).into_iter().collect()
}

/// What submit refuses in the run's `output` (a value holding references): a malformed
/// reference, a step that is not one of the run's, a run input that is not there, a secret
/// reference (the output is shown, never executed).
pub(crate) fn check_output(steps: &[PlannedStep], output: &Value, inputs: &RunInputs) -> Vec<Problem> {
    let mut problems = Vec::new();
    for path in secret_references(output) {
        problems.push(Problem {
            path: join("output", &path),
            message: "a run output cannot be a secret reference (secrets never flow through references)".into(),
        });
    }
    for Found { path, reference } in scan(output) {
        let message = match reference {
            Err(malformed) => malformed.to_string(),
            Ok(r @ (Reference::Output { step: name, .. } | Reference::Artifact { step: name, .. })) => {
                if steps.iter().any(|s| s.name == name) {
                    continue;
                }
                format!("{} {name:?} is not a step of the workflow", r.key())
            }
            Ok(Reference::Input { pointer }) => match inputs.check_pointer(pointer) {
                None => continue,
                Some(message) => message,
            },
            Ok(Reference::Item { .. }) => format!("{ITEM_KEY} is a map child's element, not in the run's output"),
        };
        problems.push(Problem { path: join("output", &path), message });
    }
    problems
}

/// The names of the steps `i` depends on, directly or transitively.
fn ancestors(steps: &[PlannedStep], i: usize) -> HashSet<&str> {
    let mut seen = HashSet::new();
    let mut todo: Vec<usize> = steps[i].depends_on.clone();
    while let Some(d) = todo.pop() {
        if d != i && seen.insert(steps[d].name.as_str()) {
            todo.extend(&steps[d].depends_on);
        }
    }
    seen
}

/// What the run's inputs may not hold: secret references (secrets never flow through
/// references; a step references its secrets in its own input). Paths as [`scan`]'s.
pub(crate) fn secret_references(inputs: &Value) -> Vec<String> {
    let mut found = Vec::new();
    visit(inputs, &mut String::new(), &mut |path, value| {
        let secret = value.as_object().is_some_and(|o| o.contains_key(secret_material::REFERENCE_KEY));
        if secret {
            found.push(path.to_owned());
        }
        !secret
    });
    found
}

/// Where references take their values from, for one step.
pub trait Sources {
    /// The output of the step `step`, or `None` if it has not succeeded.
    fn output(&self, step: &str) -> Option<&Value>;
    /// The descriptor of the artifact `name` of `step`'s succeeded attempt.
    fn artifact(&self, step: &str, name: &str) -> Option<&Value>;
    /// The run's inputs.
    fn inputs(&self) -> Option<&Value>;
    /// The element of a map child, while its map step is expanded.
    fn item(&self) -> Option<&Value> {
        None
    }
}

/// A reference that finds nothing: the step fails for good with `INPUT_REFERENCE_MISSING`.
/// Names the field, the upstream step and the pointer; never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {what}")]
pub struct Missing {
    /// `input.text`, `input.items[0]`.
    pub field: String,
    pub what: String,
    pub step: Option<String>,
    pub pointer: Option<String>,
}

impl Missing {
    pub fn to_step_error(&self) -> StepError {
        let mut details = serde_json::json!({ "field": self.field });
        if let Some(step) = &self.step {
            details["step"] = Value::String(step.clone());
        }
        if let Some(pointer) = &self.pointer {
            details["pointer"] = Value::String(pointer.clone());
        }
        StepError::permanent(codes::INPUT_REFERENCE_MISSING, self.to_string()).with_details(details)
    }
}

/// The run's `output` (as defined) with its references replaced, like [`substitute`]; the
/// field of a [`Missing`] starts with `output`.
pub fn substitute_output(output: &Value, sources: &impl Sources) -> Result<Value, Missing> {
    substitute_in("output", output, sources)
}

/// [`substitute`] for a value that is not a step's input: the field of a [`Missing`] starts
/// with `field` (`output`, `for_each`).
pub fn substitute_in(field: &str, value: &Value, sources: &impl Sources) -> Result<Value, Missing> {
    substitute(value, sources).map_err(|m| Missing { field: m.field.replacen("input", field, 1), ..m })
}

/// `input` with every well-formed reference replaced by the value it finds (secret references
/// kept, a `$secret` in a value brought in escaped). Malformed ones, refused at submit, are left
/// as they are. The first reference that finds nothing is the error.
pub fn substitute(input: &Value, sources: &impl Sources) -> Result<Value, Missing> {
    substitute_at(input, &mut String::new(), sources)
}

/// A map child's input: the map step's `input` with every reference replaced, like
/// [`substitute`], its `{"$item": "/pointer"}` references by the parts of `item`. The child
/// runs with it as it is: nothing brought in is read as a reference again.
pub fn substitute_child(input: &Value, sources: &impl Sources, item: &Value) -> Result<Value, Missing> {
    struct Child<'a, S>(&'a S, &'a Value);
    impl<S: Sources> Sources for Child<'_, S> {
        fn output(&self, step: &str) -> Option<&Value> {
            self.0.output(step)
        }
        fn artifact(&self, step: &str, name: &str) -> Option<&Value> {
            self.0.artifact(step, name)
        }
        fn inputs(&self) -> Option<&Value> {
            self.0.inputs()
        }
        fn item(&self) -> Option<&Value> {
            Some(self.1)
        }
    }
    substitute(input, &Child(sources, item))
}

fn substitute_at(value: &Value, path: &mut String, sources: &impl Sources) -> Result<Value, Missing> {
    if let Some(Ok(reference)) = reference(value) {
        // An element was escaped with its list (`for_each` is substituted first): once is enough.
        let escape = !matches!(reference, Reference::Item { .. });
        return resolve(reference, path, sources).map(|value| if escape { escape_secrets(value) } else { value });
    }
    Ok(match value {
        Value::Object(object) if !object.contains_key(secret_material::REFERENCE_KEY) => {
            let mut out = serde_json::Map::with_capacity(object.len());
            for (key, child) in object {
                let len = path.len();
                push_key(path, key);
                out.insert(key.clone(), substitute_at(child, path, sources)?);
                path.truncate(len);
            }
            Value::Object(out)
        }
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, child) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                out.push(substitute_at(child, path, sources)?);
                path.truncate(len);
            }
            Value::Array(out)
        }
        other => other.clone(),
    })
}

fn resolve(reference: Reference<'_>, path: &str, sources: &impl Sources) -> Result<Value, Missing> {
    let missing = |what: String, step: Option<&str>, pointer: Option<&str>| Missing {
        field: join("input", path),
        what,
        step: step.map(str::to_owned),
        pointer: pointer.map(str::to_owned),
    };
    match reference {
        Reference::Output { step, pointer } => {
            let output = sources.output(step).ok_or_else(|| {
                missing(format!("step {step:?} has no output (it has not succeeded)"), Some(step), None)
            })?;
            match pointer {
                None => Ok(output.clone()),
                Some(p) => output.pointer(p).cloned().ok_or_else(|| {
                    missing(format!("the output of step {step:?} has nothing at {p:?}"), Some(step), Some(p))
                }),
            }
        }
        Reference::Artifact { step, name } => sources
            .artifact(step, name)
            .cloned()
            .ok_or_else(|| missing(format!("step {step:?} has no artifact named {name:?}"), Some(step), None)),
        Reference::Input { pointer } => sources
            .inputs()
            .and_then(|inputs| inputs.pointer(pointer))
            .cloned()
            .ok_or_else(|| missing(format!("the run's inputs have nothing at {pointer:?}"), None, Some(pointer))),
        Reference::Item { pointer } => sources
            .item()
            .and_then(|item| item.pointer(pointer))
            .cloned()
            .ok_or_else(|| missing(format!("the map's element has nothing at {pointer:?}"), None, Some(pointer))),
    }
}

/// Every key `$secret`, `$$secret`, … gets one more `$`: nothing brought in by a reference is a
/// secret reference, and no two keys of an object become one.
fn escape_secrets(value: Value) -> Value {
    match value {
        Value::Object(object) => Value::Object(
            object
                .into_iter()
                .map(|(key, child)| {
                    let key = if key.trim_start_matches('$') == "secret" && key.starts_with('$') {
                        format!("${key}")
                    } else {
                        key
                    };
                    (key, escape_secrets(child))
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(escape_secrets).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use serde_json::json;

    fn problem(value: Value) -> String {
        match reference(&value) {
            Some(Err(m)) => m.to_string(),
            other => panic!("expected a malformed reference, got {other:?}"),
        }
    }

    #[test]
    fn the_four_forms_parse() {
        assert_eq!(
            reference(&json!({"$output": "fetch"})),
            Some(Ok(Reference::Output { step: "fetch", pointer: None }))
        );
        assert_eq!(
            reference(&json!({"$output": "fetch", "pointer": "/body/a~1b"})),
            Some(Ok(Reference::Output { step: "fetch", pointer: Some("/body/a~1b") }))
        );
        assert_eq!(
            reference(&json!({"$artifact": "fetch", "name": "report"})),
            Some(Ok(Reference::Artifact { step: "fetch", name: "report" }))
        );
        assert_eq!(reference(&json!({"$input": "/date"})), Some(Ok(Reference::Input { pointer: "/date" })));
        assert_eq!(reference(&json!({"$input": ""})), Some(Ok(Reference::Input { pointer: "" })));
        assert_eq!(reference(&json!({"output": "fetch"})), None);
        assert_eq!(reference(&json!({"$secret": "api"})), None);
        assert_eq!(reference(&json!("$output")), None);
    }

    #[test]
    fn malformed_references_say_what_is_wrong_and_how_to_write_them() {
        assert_eq!(
            problem(json!({"$output": "fetch", "pointr": "/body"})),
            r#"malformed $output reference (unknown key "pointr"); write {"$output": "step"} or {"$output": "step", "pointer": "/json/pointer"}"#
        );
        assert_eq!(
            problem(json!({"$output": 3})),
            r#"malformed $output reference ("$output" must be a step name (a non-empty string)); write {"$output": "step"} or {"$output": "step", "pointer": "/json/pointer"}"#
        );
        assert!(problem(json!({"$output": ""})).contains("must be a step name"));
        assert!(
            problem(json!({"$output": "f", "pointer": 1})).contains(r#""pointer" must be a JSON Pointer (a string)"#)
        );
        assert_eq!(
            problem(json!({"$output": "fetch", "pointer": "body"})),
            r#"malformed $output reference (pointer "body" is not a JSON Pointer (RFC 6901): it must be empty or start with "/"); write {"$output": "step"} or {"$output": "step", "pointer": "/json/pointer"}"#
        );
        assert!(
            problem(json!({"$input": "/a~2"}))
                .contains(r#"pointer "/a~2" is not a JSON Pointer (RFC 6901): "~" must be followed by 0 or 1"#)
        );
        assert!(problem(json!({"$input": "/a~"})).contains(r#""~" must be followed by 0 or 1"#));
        assert_eq!(
            problem(json!({"$artifact": "fetch"})),
            r#"malformed $artifact reference ("name" is missing: the artifact's name (a non-empty string)); write {"$artifact": "step", "name": "artifact name"}"#
        );
        assert!(
            problem(json!({"$artifact": "fetch", "name": ["x"]})).contains(r#""name" must be the artifact's name"#)
        );
        assert!(problem(json!({"$input": "/a", "pointer": "/b"})).contains(r#"unknown key "pointer""#));
        assert!(problem(json!({"$output": "a", "$input": "/b"})).contains("it also holds $input"));
    }

    #[test]
    fn scan_finds_references_at_their_paths_and_leaves_secrets_alone() {
        let input = json!({
            "text": {"$output": "fetch", "pointer": "/body"},
            "items": [1, {"url": {"$artifact": "fetch", "name": "r"}}],
            "odd key": {"$input": "/x"},
            "auth": {"$secret": "api"},
            "bad": {"$output": 1},
        });
        let mut found: Vec<(String, bool)> = scan(&input).into_iter().map(|f| (f.path, f.reference.is_ok())).collect();
        found.sort();
        assert_eq!(
            found,
            [
                ("[\"odd key\"]".to_owned(), true),
                ("bad".to_owned(), false),
                ("items[1].url".to_owned(), true),
                ("text".to_owned(), true)
            ]
        );
        let none = json!({"auth": {"$secret": "api", "x": {"$output": "a"}}, "n": [1, "$output"]});
        assert_eq!(scan(&none), [], "inside a secret reference nothing is a reference");
    }

    #[derive(Default)]
    struct Fixed {
        outputs: HashMap<&'static str, Value>,
        artifacts: HashMap<(&'static str, &'static str), Value>,
        inputs: Option<Value>,
    }

    impl Sources for Fixed {
        fn output(&self, step: &str) -> Option<&Value> {
            self.outputs.get(step)
        }
        fn artifact(&self, step: &str, name: &str) -> Option<&Value> {
            self.artifacts.iter().find(|((s, n), _)| *s == step && *n == name).map(|(_, v)| v)
        }
        fn inputs(&self) -> Option<&Value> {
            self.inputs.as_ref()
        }
    }

    fn sources() -> Fixed {
        Fixed {
            outputs: HashMap::from([
                (
                    "fetch",
                    json!({"body": "hello", "list": [10, 20], "a/b": 1, "leak": {"$secret": "api", "$$secret": "x"}}),
                ),
                ("empty", Value::Null),
            ]),
            artifacts: HashMap::from([(("fetch", "report"), json!({"uri": "s3://b/k", "media_type": null}))]),
            inputs: Some(json!({"date": "2026-12-04", "n": {"deep": [true]}})),
        }
    }

    #[test]
    fn substitution_replaces_every_reference_with_what_it_finds() {
        let input = json!({
            "text": {"$output": "fetch", "pointer": "/body"},
            "second": {"$output": "fetch", "pointer": "/list/1"},
            "escaped": {"$output": "fetch", "pointer": "/a~1b"},
            "whole": [{"$output": "empty"}],
            "report": {"$artifact": "fetch", "name": "report"},
            "date": {"$input": "/date"},
            "deep": {"$input": "/n/deep/0"},
            "key": {"$secret": "api"},
            "literal": "$output",
        });
        let resolved = substitute(&input, &sources()).unwrap();
        assert_eq!(
            resolved,
            json!({
                "text": "hello", "second": 20, "escaped": 1, "whole": [null],
                "report": {"uri": "s3://b/k", "media_type": null},
                "date": "2026-12-04", "deep": true,
                "key": {"$secret": "api"}, "literal": "$output",
            })
        );
    }

    #[test]
    fn a_secret_reference_brought_in_by_a_reference_is_escaped_not_kept() {
        let resolved = substitute(&json!({"all": {"$output": "fetch"}}), &sources()).unwrap();
        assert_eq!(resolved["all"]["leak"], json!({"$$secret": "api", "$$$secret": "x"}));
        assert!(secret_material::reference(&resolved["all"]["leak"]).is_none());
        // A value brought in is not searched for references again.
        let mut s = sources();
        s.outputs.insert("meta", json!({"$output": "fetch"}));
        assert_eq!(substitute(&json!({"m": {"$output": "meta"}}), &s).unwrap(), json!({"m": {"$output": "fetch"}}));
    }

    #[test]
    fn a_reference_that_finds_nothing_names_the_field_the_step_and_the_pointer_never_a_value() {
        let error = |input: Value| substitute(&input, &sources()).unwrap_err().to_step_error();
        let e = error(json!({"a": [{"text": {"$output": "fetch", "pointer": "/bodyy"}}]}));
        assert_eq!((e.code.as_str(), e.retryable), (codes::INPUT_REFERENCE_MISSING, false));
        assert_eq!(e.message, r#"input.a[0].text: the output of step "fetch" has nothing at "/bodyy""#);
        assert_eq!(e.details, json!({"field": "input.a[0].text", "step": "fetch", "pointer": "/bodyy"}));
        assert_eq!(
            error(json!({"r": {"$artifact": "fetch", "name": "nope"}})).message,
            r#"input.r: step "fetch" has no artifact named "nope""#
        );
        assert_eq!(
            error(json!({"d": {"$input": "/dat"}})).message,
            r#"input.d: the run's inputs have nothing at "/dat""#
        );
        assert_eq!(
            error(json!({"x": {"$output": "gone"}})).message,
            r#"input.x: step "gone" has no output (it has not succeeded)"#
        );
        // An index past the end, a leading zero, a pointer into a string: nothing there.
        for p in ["/list/2", "/list/01", "/body/0"] {
            let e = error(json!({"x": {"$output": "fetch", "pointer": p}}));
            assert!(!e.message.contains("hello") && !e.message.contains("10"), "{}", e.message);
        }
    }
}
