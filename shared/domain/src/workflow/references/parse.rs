//! One reference read from a JSON value: the keys of the four forms, [`Reference`], and
//! [`Malformed`] for an object that holds a reference key but is not a well-formed reference.

use serde_json::Value;

use crate::secret_material;

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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
}
