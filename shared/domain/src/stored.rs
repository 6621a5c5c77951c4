//! The reference a step's output becomes when it is larger than the inline bound
//! (`RARA_INLINE_OUTPUT_BYTES`) and was written to the artifact store (a claim check):
//!
//! ```json
//! {"$stored": {"uri": "s3://bucket/runs/…/1.output.json", "size_bytes": 5242880,
//!              "digest": "sha256:…", "media_type": "application/json"}}
//! ```
//!
//! Only rara writes one: an output an executor returns with a top-level `$stored` key is
//! escaped when it is recorded ([`escape`]: `$stored` → `$$stored`, `$$stored` → `$$$stored`),
//! so no step can forge a reference to another's object.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The key of the reference.
pub const KEY: &str = "$stored";

/// Where an offloaded output lies, its size and digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Descriptor {
    pub uri: String,
    pub size_bytes: u64,
    /// `sha256:<hex>`.
    pub digest: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
}

impl Descriptor {
    /// `{"$stored": descriptor}`.
    pub fn reference(&self) -> Value {
        let mut object = serde_json::Map::with_capacity(1);
        object.insert(KEY.to_owned(), serde_json::to_value(self).unwrap_or(Value::Null));
        Value::Object(object)
    }

    /// The descriptor when `value` is a reference (an object whose only key is `$stored`).
    pub fn of(value: &Value) -> Option<Descriptor> {
        let object = value.as_object().filter(|o| o.len() == 1)?;
        serde_json::from_value(object.get(KEY)?.clone()).ok()
    }
}

/// `output` with a top-level key of only `$`s followed by `stored` given one more `$`: what an
/// executor returned never reads as a reference.
pub fn escape(output: Value) -> Value {
    match output {
        Value::Object(object) if object.keys().any(|k| is_escaped_key(k)) => Value::Object(
            object.into_iter().map(|(k, v)| if is_escaped_key(&k) { (format!("${k}"), v) } else { (k, v) }).collect(),
        ),
        other => other,
    }
}

fn is_escaped_key(key: &str) -> bool {
    key.trim_start_matches('$') == "stored" && key.starts_with('$')
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_reference_round_trips_and_a_returned_one_is_escaped_injectively() {
        let d = Descriptor { uri: "s3://b/k".into(), size_bytes: 5, digest: "sha256:00".into(), media_type: None };
        assert_eq!(Descriptor::of(&d.reference()), Some(d.clone()));
        let forged = d.reference();
        let escaped = escape(forged);
        assert_eq!(Descriptor::of(&escaped), None);
        assert!(escaped.get("$$stored").is_some());
        let both = escape(json!({"$stored": 1, "$$stored": 2, "stored": 3}));
        assert_eq!(both, json!({"$$stored": 1, "$$$stored": 2, "stored": 3}));
        assert_eq!(Descriptor::of(&json!({"$stored": d, "other": 1})), None, "only a lone key is a reference");
    }
}
