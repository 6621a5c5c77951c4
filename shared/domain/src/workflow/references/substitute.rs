//! Substitution at claim: every reference replaced by the value it finds in its [`Sources`], or
//! the first one that finds nothing as a [`Missing`] (the step fails for good).

use serde_json::Value;

use crate::StepError;
use crate::secret_material::{self, push_key};
use crate::step_error::codes;
use crate::workflow::references::parse::{Reference, reference};
use crate::workflow::references::scan::join;

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
    /// The whole of `step`'s output when it was offloaded (its output is a
    /// [`stored`](crate::stored) reference) and read for a pointer into it.
    fn loaded(&self, _step: &str) -> Option<&Value> {
        None
    }
    /// The whole of the run's inputs when they were offloaded (they are a
    /// [`stored`](crate::stored) reference) and read for a pointer into them.
    fn loaded_inputs(&self) -> Option<&Value> {
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
        fn loaded(&self, step: &str) -> Option<&Value> {
            self.0.loaded(step)
        }
        fn loaded_inputs(&self) -> Option<&Value> {
            self.0.loaded_inputs()
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
            // A pointer goes into an offloaded output's whole (read at claim); the whole output
            // is passed on as its reference.
            let offloaded = crate::stored::Descriptor::of(output).is_some();
            match pointer {
                None => Ok(output.clone()),
                Some(p) => if offloaded { sources.loaded(step).unwrap_or(output) } else { output }
                    .pointer(p)
                    .cloned()
                    .ok_or_else(|| {
                        missing(format!("the output of step {step:?} has nothing at {p:?}"), Some(step), Some(p))
                    }),
            }
        }
        Reference::Artifact { step, name } => sources
            .artifact(step, name)
            .cloned()
            .ok_or_else(|| missing(format!("step {step:?} has no artifact named {name:?}"), Some(step), None)),
        Reference::Input { pointer } => {
            // Offloaded inputs: a pointer goes into their whole (read at claim), the whole is
            // passed on as its reference.
            let inputs = sources.inputs().and_then(|inputs| match crate::stored::Descriptor::of(inputs) {
                Some(_) if !pointer.is_empty() => sources.loaded_inputs(),
                _ => Some(inputs),
            });
            inputs
                .and_then(|inputs| inputs.pointer(pointer))
                .cloned()
                .ok_or_else(|| missing(format!("the run's inputs have nothing at {pointer:?}"), None, Some(pointer)))
        }
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

    use serde_json::json;

    use super::*;

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
    fn offloaded_inputs_are_read_through_their_loaded_whole_and_passed_whole_as_the_reference() {
        struct Offloaded(Value, Option<Value>);
        impl Sources for Offloaded {
            fn output(&self, _: &str) -> Option<&Value> {
                None
            }
            fn artifact(&self, _: &str, _: &str) -> Option<&Value> {
                None
            }
            fn inputs(&self) -> Option<&Value> {
                Some(&self.0)
            }
            fn loaded_inputs(&self) -> Option<&Value> {
                self.1.as_ref()
            }
        }
        let d = crate::stored::Descriptor {
            uri: "s3://b/k".into(),
            size_bytes: 9,
            digest: "sha256:0".into(),
            media_type: None,
        };
        let input = json!({"n": {"$input": "/big/n"}, "all": {"$input": ""}});
        let loaded = Offloaded(d.reference(), Some(json!({"big": {"n": 7}})));
        assert_eq!(substitute(&input, &loaded).unwrap(), json!({"n": 7, "all": d.reference()}));
        // Never a pointer into the reference itself.
        let unread = Offloaded(d.reference(), None);
        let e = substitute(&json!({"u": {"$input": "/$stored/uri"}}), &unread).unwrap_err();
        assert_eq!(e.field, "input.u");
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
