//! Finding references in a value: [`scan`] lists each with its field path; the run's inputs are
//! searched for secret references the same way.

use serde_json::Value;

use crate::secret_material::{self, push_key};
use crate::workflow::references::parse::{Malformed, Reference, reference};

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
pub(crate) fn join(prefix: &str, path: &str) -> String {
    match path {
        "" => prefix.to_owned(),
        p if p.starts_with('[') => format!("{prefix}{p}"),
        p => format!("{prefix}.{p}"),
    }
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
}
