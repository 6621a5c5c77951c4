//! The run search's filters beyond status, name and time, shared by the API's list and bulk
//! actions and by the console: each checked where it enters, with the parameter in the error.
//!
//! | parameter | form | matches |
//! |---|---|---|
//! | `error` | an error code, 1 to [`MAX_CODE`] bytes of `A-Z a-z 0-9 _ . : / -` | runs with a step that failed or was cancelled with that code |
//! | `workflow` | `NAME` or `NAME@VERSION` | runs of that workflow name, at that registered version (any version without one) |
//! | `where` | `inputs.PATH=VALUE`, repeatable up to [`MAX_WHERE`] | runs whose inputs hold VALUE at PATH |
//!
//! PATH is 1 to [`MAX_DEPTH`] keys joined by `.`, each 1 to [`MAX_KEY`] bytes of
//! `A-Z a-z 0-9 _ -`. VALUE (at most [`MAX_VALUE`] bytes) is read as JSON when it is a JSON
//! number, `true`, `false`, `null` or a quoted string (`"5"` is the string 5), and as a string
//! otherwise (`acme`); an object or an array is refused. Conditions are matched together as one
//! containment (`inputs @> {"tenant": "acme"}`), which a GIN index answers. Inputs stored by
//! reference (`{"$stored": …}`) match no condition on a field inside them.

use axum::extract::{FromRequestParts, Query};
use axum::http::Uri;
use axum::http::request::Parts;
use rara_store::browse::RunFilter;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::Error;

/// The most `where` conditions in one search.
pub const MAX_WHERE: usize = 4;
/// The most keys in a condition's path.
pub const MAX_DEPTH: usize = 8;
/// The longest key of a path, in bytes.
pub const MAX_KEY: usize = 64;
/// The longest value of a condition, in bytes.
pub const MAX_VALUE: usize = 256;
/// The longest error code, in bytes (what a remote executor's code is cut to).
pub const MAX_CODE: usize = 128;
/// The longest workflow name, in bytes (a definition's bound).
const MAX_NAME: usize = rara_domain::workflow::MAX_NAME_LEN;

/// The search fields of a request beyond status, name and time, as given (an empty text is no
/// filter).
#[derive(Debug, Clone, Copy, Default)]
pub struct Extra<'a> {
    pub error: Option<&'a str>,
    pub workflow: Option<&'a str>,
    pub wheres: &'a [String],
}

/// `filter` narrowed by `extra`, each field checked. `workflow` and a `name` in `filter` are
/// refused together (one names the workflow).
pub fn narrow(mut filter: RunFilter, extra: Extra<'_>) -> Result<RunFilter, Error> {
    fn given(v: Option<&str>) -> Option<&str> {
        v.map(str::trim).filter(|v| !v.is_empty())
    }
    if let Some(code) = given(extra.error) {
        filter.error_code = Some(error_code(code)?);
    }
    if let Some(workflow) = given(extra.workflow) {
        if filter.name.is_some() {
            return Err(Error::bad_request("give name or workflow, not both").with_field("workflow"));
        }
        let (name, version) = workflow_ref(workflow)?;
        filter.name = Some(name);
        filter.version = version;
    }
    filter.inputs = inputs_document(extra.wheres)?;
    Ok(filter)
}

/// An error code, bounded and of the characters codes are written with.
fn error_code(code: &str) -> Result<String, Error> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_.:/-".contains(c);
    if code.len() > MAX_CODE || !code.chars().all(allowed) {
        return Err(Error::bad_request(format!(
            "an error code is 1 to {MAX_CODE} bytes of letters, digits and _ . : / -"
        ))
        .with_field("error"));
    }
    Ok(code.to_owned())
}

/// `NAME` (any version) or `NAME@VERSION` (a registered version, from 1).
fn workflow_ref(text: &str) -> Result<(String, Option<i32>), Error> {
    let bad = |message: String| Error::bad_request(message).with_field("workflow");
    let (name, version) = match text.rsplit_once('@') {
        None => (text, None),
        Some((name, v)) => match v.parse::<i32>() {
            Ok(v) if v > 0 => (name, Some(v)),
            _ => return Err(bad("workflow is NAME or NAME@VERSION, the version a number from 1".to_owned())),
        },
    };
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(bad(format!("a workflow name is 1 to {MAX_NAME} bytes")));
    }
    Ok((name.to_owned(), version))
}

/// The containment document of the `where` conditions (`None`: no condition).
pub fn inputs_document(wheres: &[String]) -> Result<Option<Value>, Error> {
    let wheres: Vec<(usize, &str)> =
        wheres.iter().map(|w| w.trim()).enumerate().filter(|(_, w)| !w.is_empty()).collect();
    if wheres.len() > MAX_WHERE {
        return Err(Error::bad_request(format!("at most {MAX_WHERE} where conditions")).with_field("where"));
    }
    let mut document = Map::new();
    for (i, text) in &wheres {
        let field = format!("where[{i}]");
        let (path, value) = condition(text).map_err(|message| Error::bad_request(message).with_field(&field))?;
        place(&mut document, &path, value).map_err(|message| Error::bad_request(message).with_field(&field))?;
    }
    Ok((!wheres.is_empty()).then_some(Value::Object(document)))
}

/// `inputs.PATH=VALUE` read: the path's keys and the value.
fn condition(text: &str) -> Result<(Vec<&str>, Value), String> {
    let syntax = || format!("a condition is inputs.PATH=VALUE (as in inputs.tenant=acme), not {text:?}");
    let (lhs, value) = text.split_once('=').ok_or_else(syntax)?;
    let path = lhs.trim().strip_prefix("inputs.").ok_or_else(syntax)?;
    let keys: Vec<&str> = path.split('.').collect();
    let key_ok = |k: &&str| {
        !k.is_empty() && k.len() <= MAX_KEY && k.chars().all(|c| c.is_ascii_alphanumeric() || "_-".contains(c))
    };
    if keys.len() > MAX_DEPTH || !keys.iter().all(key_ok) {
        return Err(format!(
            "a path is 1 to {MAX_DEPTH} keys joined by '.', each 1 to {MAX_KEY} bytes of letters, digits, _ and -"
        ));
    }
    let value = value.trim();
    if value.len() > MAX_VALUE {
        return Err(format!("a value is at most {MAX_VALUE} bytes; this one has {}", value.len()));
    }
    let value = match serde_json::from_str::<Value>(value) {
        Ok(Value::Object(_) | Value::Array(_)) => {
            return Err("a value is a string, a number, true, false or null".into());
        }
        Ok(scalar) => scalar,
        Err(_) => Value::String(value.to_owned()),
    };
    Ok((keys, value))
}

/// Puts `value` at `path` in `document`; a path that another condition already holds (or
/// passes through a value of) is refused.
fn place(document: &mut Map<String, Value>, path: &[&str], value: Value) -> Result<(), String> {
    let clash = || format!("{} is given twice, or inside another condition's value", path.join("."));
    let (last, parents) = path.split_last().ok_or_else(clash)?;
    let mut at = document;
    for key in parents {
        let next = at.entry(key.to_string()).or_insert_with(|| Value::Object(Map::new()));
        at = next.as_object_mut().ok_or_else(clash)?;
    }
    if at.contains_key(*last) {
        return Err(clash());
    }
    at.insert(last.to_string(), value);
    Ok(())
}

/// A query whose `where` parameters are taken apart (they repeat; the typed query takes each
/// other parameter once).
#[derive(Debug, Clone)]
pub struct Searched<T> {
    pub query: T,
    pub wheres: Vec<String>,
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Searched<T> {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Error> {
        let Query(pairs) = Query::<Vec<(String, String)>>::try_from_uri(&parts.uri)?;
        split(pairs)
    }
}

/// `pairs` (a query's or a form's) as the typed `T` and the `where` values.
pub fn split<T: DeserializeOwned>(pairs: Vec<(String, String)>) -> Result<Searched<T>, Error> {
    let (wheres, rest): (Vec<_>, Vec<_>) = pairs.into_iter().partition(|(k, _)| k == "where");
    if wheres.iter().filter(|(_, v)| !v.trim().is_empty()).count() > MAX_WHERE {
        return Err(Error::bad_request(format!("at most {MAX_WHERE} where conditions")).with_field("where"));
    }
    let text: Vec<String> = rest.iter().map(|(k, v)| format!("{}={}", encode(k), encode(v))).collect();
    let uri: Uri = format!("/?{}", text.join("&")).parse().map_err(|_| Error::bad_request("the query is too long"))?;
    let Query(query) = Query::<T>::try_from_uri(&uri)?;
    Ok(Searched { query, wheres: wheres.into_iter().map(|(_, v)| v).collect() })
}

/// Percent-encodes a query value (everything but unreserved characters).
pub fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(wheres: &[&str]) -> Result<Option<Value>, Error> {
        inputs_document(&wheres.iter().map(|w| w.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn conditions_are_one_containment_document_with_json_scalars_read_as_json() {
        let read = doc(&["inputs.tenant=acme", "inputs.limits.max=5", "inputs.code=\"5\"", "inputs.on=true"]).unwrap();
        assert_eq!(read, Some(json!({"tenant": "acme", "limits": {"max": 5}, "code": "5", "on": true})));
        assert_eq!(doc(&["", "  "]).unwrap(), None, "empty fields are no condition");
    }

    #[test]
    fn bad_conditions_are_refused_naming_the_condition() {
        let long = format!("inputs.k={}", "v".repeat(MAX_VALUE + 1));
        let deep = format!("inputs.{}=1", ["a"; MAX_DEPTH + 1].join("."));
        for (bad, index) in [
            ("tenant=acme", 0),
            ("outputs.x=1", 0),
            ("inputs.=1", 0),
            ("inputs.a..b=1", 0),
            ("inputs.a b=1", 0),
            ("inputs.a={\"b\":1}", 0),
            ("inputs.a=[1]", 0),
            (long.as_str(), 0),
            (deep.as_str(), 0),
        ] {
            let e = doc(&[bad]).unwrap_err();
            assert_eq!(e.body.field.as_deref(), Some(format!("where[{index}]").as_str()), "{bad}: {e:?}");
        }
        let e = doc(&["inputs.a=1", "inputs.a.b=2"]).unwrap_err();
        assert_eq!(e.body.field.as_deref(), Some("where[1]"));
        assert!(doc(&["inputs.a=1"; MAX_WHERE + 1]).is_err());
    }

    #[test]
    fn workflow_and_error_are_checked() {
        let narrowed = |error: Option<&str>, workflow: Option<&str>| {
            narrow(RunFilter::default(), Extra { error, workflow, wheres: &[] })
        };
        let f = narrowed(Some("E_BROKEN"), Some("billing@3")).unwrap();
        assert_eq!(
            (f.error_code.as_deref(), f.name.as_deref(), f.version),
            (Some("E_BROKEN"), Some("billing"), Some(3))
        );
        assert_eq!(narrowed(None, Some("billing")).unwrap().version, None);
        for (error, workflow, field) in [
            (Some("E BROKEN"), None, "error"),
            (Some(&*"E".repeat(MAX_CODE + 1)), None, "error"),
            (None, Some("billing@0"), "workflow"),
            (None, Some("billing@latest"), "workflow"),
            (None, Some("@3"), "workflow"),
        ] {
            assert_eq!(
                narrowed(error, workflow).unwrap_err().body.field.as_deref(),
                Some(field),
                "{error:?} {workflow:?}"
            );
        }
        let named = RunFilter { name: Some("x".into()), ..RunFilter::default() };
        assert!(narrow(named, Extra { workflow: Some("y"), ..Extra::default() }).is_err());
    }
}
