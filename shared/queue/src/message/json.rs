//! The strict reading both formats share: one JSON object whose keys are counted on the text,
//! ids in their canonical spelling, and rejections that name the fault and never echo the body.

use serde::Deserialize;
use uuid::Uuid;

use super::Error;

/// serde_json's nesting limit: a deeper body is refused as too deep, not as bad JSON.
const MAX_DEPTH: usize = 128;

/// A body's top-level object and its keys (in order, with repeats).
pub(super) fn object(body: &str) -> Result<(serde_json::Map<String, serde_json::Value>, Vec<String>), Error> {
    let value: serde_json::Value = serde_json::from_str(body).map_err(malformed)?;
    let serde_json::Value::Object(object) = value else {
        return Err(Error::Malformed(format!("the body must be a JSON object, found {}", kind(&value))));
    };
    // `Value` keeps the last of two equal keys: count them on the text.
    let keys: Vec<String> = serde_json::from_str::<Keys>(body).map_err(malformed)?.0;
    Ok((object, keys))
}

/// No field of `allowed` twice, no other field.
pub(super) fn fields(keys: &[String], allowed: &[&str], named: &str) -> Result<(), Error> {
    for field in allowed {
        if keys.iter().filter(|k| k == field).count() > 1 {
            return Err(Error::Malformed(format!("field `{field}` appears more than once")));
        }
    }
    if let Some(unknown) = keys.iter().find(|k| !allowed.contains(&k.as_str())) {
        return Err(Error::Malformed(format!(
            "unknown field `{}`; a step message has only {named}",
            unknown.chars().take(64).collect::<String>()
        )));
    }
    Ok(())
}

/// The top-level keys of a JSON object, in order and with repeats.
struct Keys(Vec<String>);

impl<'de> Deserialize<'de> for Keys {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Keys;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
                let mut keys = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    keys.push(key);
                }
                Ok(Keys(keys))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

pub(super) fn kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// An id field: present, a string, and a UUID in its canonical spelling.
pub(super) fn canonical_uuid(field: &str, value: Option<&serde_json::Value>) -> Result<Uuid, Error> {
    let text = match value {
        None => return Err(Error::Malformed(format!("missing field `{field}`"))),
        Some(serde_json::Value::String(text)) => text,
        Some(other) => return Err(Error::Malformed(format!("`{field}` must be a UUID string, found {}", kind(other)))),
    };
    match Uuid::try_parse(text) {
        Ok(id) if id.hyphenated().to_string() == *text => Ok(id),
        Ok(_) => Err(Error::Malformed(format!(
            "`{field}` must be a UUID spelt as rara writes it (lower-case, hyphenated 8-4-4-4-12)"
        ))),
        Err(_) => Err(Error::Malformed(format!("`{field}` is not a UUID"))),
    }
}

/// A JSON error that names the problem and its position but never echoes the body (a
/// poisoned message could carry anything, and the reason is logged).
pub(super) fn malformed(e: serde_json::Error) -> Error {
    let text = e.to_string();
    let kind = if text.starts_with("recursion limit exceeded") {
        format!("nested deeper than {MAX_DEPTH} levels")
    } else {
        match e.classify() {
            serde_json::error::Category::Syntax => "not valid JSON".to_owned(),
            serde_json::error::Category::Eof => "truncated JSON".to_owned(),
            serde_json::error::Category::Data => "the body must be a JSON object".to_owned(),
            serde_json::error::Category::Io => "unreadable".to_owned(),
        }
    };
    Error::Malformed(format!("{kind} (line {}, column {})", e.line(), e.column()))
}
