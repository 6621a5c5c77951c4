//! Secret references and the detection of secret material embedded in a step's input.
//!
//! A step references a secret as `{"$secret": "name"}` anywhere in its input; the executor
//! resolves the reference just before the step runs, so the value is never stored, queued
//! or logged. [`scan`] finds what should have been a reference: PEM private keys, AWS
//! access key ids, and literal strings under fields named like credentials (`password`,
//! `token`, `authorization`, ...). A finding names the field and the kind of secret, never
//! the value.

use serde_json::Value;

/// The key of a secret reference object: `{"$secret": "name"}`.
pub const REFERENCE_KEY: &str = "$secret";
/// The longest secret name accepted in a reference.
pub const MAX_NAME_LEN: usize = 256;

/// Field names (lower-cased, without `-` and `_`) whose literal string values are refused:
/// a name ending with one of these (`db_password`, `x-api-key`, `access_token`).
const SECRET_FIELD_SUFFIXES: [(&str, &str); 9] = [
    ("password", "a password"),
    ("passwd", "a password"),
    ("secret", "a secret"),
    ("secretkey", "a secret key"),
    ("secretaccesskey", "a secret access key"),
    ("token", "a token"),
    ("apikey", "an API key"),
    ("privatekey", "a private key"),
    ("authorization", "credentials"),
];

/// What an object holding [`REFERENCE_KEY`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reference<'a> {
    /// `{"$secret": "name"}` with a valid name.
    Name(&'a str),
    /// `$secret` with other keys beside it, or a value that is not a valid name.
    Malformed,
}

/// `Some` when `value` is an object holding [`REFERENCE_KEY`].
pub fn reference(value: &Value) -> Option<Reference<'_>> {
    let object = value.as_object()?;
    let name = object.get(REFERENCE_KEY)?;
    Some(match name.as_str() {
        Some(name) if object.len() == 1 && valid_name(name) => Reference::Name(name),
        _ => Reference::Malformed,
    })
}

/// Whether `value` holds a secret reference anywhere (well-formed or not): an input that must
/// pass the executor's secret resolution before its step runs.
pub fn has_reference(value: &Value) -> bool {
    match value {
        Value::Object(object) => object.contains_key(REFERENCE_KEY) || object.values().any(has_reference),
        Value::Array(items) => items.iter().any(has_reference),
        _ => false,
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME_LEN && !name.chars().any(char::is_control)
}

/// The kind of secret material found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `-----BEGIN ... PRIVATE KEY-----`.
    PrivateKey,
    /// `AKIA`/`ASIA` followed by 16 upper-case letters or digits.
    AwsAccessKeyId,
    /// A literal string under a credential-like field name; says what it looks like.
    SecretField(&'static str),
    /// An object with `$secret` that is not `{"$secret": "name"}`.
    MalformedReference,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self {
            Kind::PrivateKey => "a PEM private key",
            Kind::AwsAccessKeyId => "an AWS access key id",
            Kind::SecretField(what) => what,
            Kind::MalformedReference => {
                return write!(
                    f,
                    "malformed secret reference; write {{\"{REFERENCE_KEY}\": \"name\"}} (a name of 1 to {MAX_NAME_LEN} characters) and nothing else in that object"
                );
            }
        };
        write!(f, "looks like a secret ({what}); reference it instead: {{\"{REFERENCE_KEY}\": \"name\"}}")
    }
}

/// Secret material at a path relative to the scanned value (`headers.authorization`,
/// `items[2].key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub path: String,
    pub kind: Kind,
}

/// Every piece of secret material in `input`, in document order.
pub fn scan(input: &Value) -> Vec<Finding> {
    let mut findings = Vec::new();
    walk(input, &mut String::new(), None, &mut findings);
    findings
}

fn walk(value: &Value, path: &mut String, field: Option<&str>, findings: &mut Vec<Finding>) {
    let mut found = |kind| findings.push(Finding { path: path.clone(), kind });
    match value {
        Value::String(text) => {
            if let Some(kind) = in_text(text) {
                found(kind);
            } else if let Some(what) = field.and_then(secret_field)
                && !text.is_empty()
            {
                found(Kind::SecretField(refine(what, text)));
            }
        }
        Value::Object(object) => match reference(value) {
            Some(Reference::Name(_)) => {}
            Some(Reference::Malformed) => found(Kind::MalformedReference),
            None => {
                for (key, child) in object {
                    let len = path.len();
                    push_key(path, key);
                    walk(child, path, Some(key), findings);
                    path.truncate(len);
                }
            }
        },
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                // An array under `tokens: [..]` or `password: [..]` holds the field's values.
                walk(child, path, field, findings);
                path.truncate(len);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Appends `key` to a field path: `a.b`, `a["odd key"]`.
pub(crate) fn push_key(path: &mut String, key: &str) {
    if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '$')) {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key);
    } else {
        path.push_str(&format!("[{key:?}]"));
    }
}

/// What a field named `name` would hold, if it is named like a credential.
fn secret_field(name: &str) -> Option<&'static str> {
    let normalized: String = name.chars().filter(|c| !matches!(c, '-' | '_')).flat_map(char::to_lowercase).collect();
    SECRET_FIELD_SUFFIXES.iter().find(|(suffix, _)| normalized.ends_with(suffix)).map(|&(_, what)| what)
}

/// A more precise description of an authorization value.
fn refine(what: &'static str, text: &str) -> &'static str {
    if what != "credentials" {
        return what;
    }
    let scheme = text.split_whitespace().next().unwrap_or_default();
    if scheme.eq_ignore_ascii_case("bearer") {
        "a bearer token"
    } else if scheme.eq_ignore_ascii_case("basic") {
        "basic credentials"
    } else {
        what
    }
}

/// Secret material recognisable in any string, whatever its field.
fn in_text(text: &str) -> Option<Kind> {
    if has_private_key(text) {
        Some(Kind::PrivateKey)
    } else if has_aws_access_key_id(text) {
        Some(Kind::AwsAccessKeyId)
    } else {
        None
    }
}

fn has_private_key(text: &str) -> bool {
    const BEGIN: &str = "-----BEGIN ";
    text.match_indices(BEGIN).any(|(at, _)| {
        let rest = &text[at + BEGIN.len()..];
        rest.find("-----").is_some_and(|end| rest[..end].ends_with("PRIVATE KEY"))
    })
}

fn has_aws_access_key_id(text: &str) -> bool {
    const LEN: usize = 20;
    let bytes = text.as_bytes();
    let key_char = |b: u8| b.is_ascii_uppercase() || b.is_ascii_digit();
    (0..bytes.len().saturating_sub(LEN - 1)).any(|at| {
        let candidate = &bytes[at..at + LEN];
        (candidate.starts_with(b"AKIA") || candidate.starts_with(b"ASIA"))
            && candidate[4..].iter().all(|&b| key_char(b))
            && (at == 0 || !bytes[at - 1].is_ascii_alphanumeric())
            && bytes.get(at + LEN).is_none_or(|b| !b.is_ascii_alphanumeric())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn a_reference_anywhere_is_found_and_plain_values_are_not() {
        assert!(has_reference(&json!({"token": {"$secret": "api"}})));
        assert!(has_reference(&json!([1, {"deep": [{"$secret": 5}]}])), "a malformed one too");
        assert!(!has_reference(&json!({"token": "literal", "list": [{"secret": "x"}]})));
        assert!(!has_reference(&json!("$secret")));
    }

    fn found(input: Value) -> Vec<(String, String)> {
        let mut found: Vec<_> = scan(&input).into_iter().map(|f| (f.path, f.kind.to_string())).collect();
        found.sort();
        found
    }

    #[test]
    fn references_are_fine_and_malformed_ones_are_named() {
        assert_eq!(reference(&json!({"$secret": "api"})), Some(Reference::Name("api")));
        assert_eq!(reference(&json!({"api": 1})), None);
        for bad in [json!({"$secret": ""}), json!({"$secret": 3}), json!({"$secret": "a", "b": 1})] {
            assert_eq!(reference(&bad), Some(Reference::Malformed), "{bad}");
        }
        let input = json!({"headers": {"authorization": {"$secret": "api"}}, "x": [{"$secret": 1}]});
        let f = found(input);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].0, "x[0]");
        assert!(f[0].1.starts_with("malformed secret reference"), "{f:?}");
    }

    #[test]
    fn credential_fields_with_literal_strings_are_found() {
        let input = json!({
            "headers": {"Authorization": "Bearer abc", "X-Api-Key": "k1", "content-type": "text/plain"},
            "db": {"PASSWORD": "hunter2", "user": "rara", "client_secret": "s", "access_token": "t"},
            "proxy_authorization": "Basic dXNlcjpwdw==",
            "private-key": "k",
            "passwd": ["p"],
            "token": "",
            "max_tokens": "100",
            "secret_name": "prod/db",
        });
        let f = found(input);
        let paths: Vec<&str> = f.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "db.PASSWORD",
                "db.access_token",
                "db.client_secret",
                "headers.Authorization",
                "headers.X-Api-Key",
                "passwd[0]",
                "private-key",
                "proxy_authorization"
            ]
        );
        let message = |p: &str| f.iter().find(|(path, _)| path == p).map(|(_, m)| m.clone()).unwrap_or_default();
        assert_eq!(
            message("headers.Authorization"),
            r#"looks like a secret (a bearer token); reference it instead: {"$secret": "name"}"#
        );
        assert!(message("proxy_authorization").contains("basic credentials"));
        assert!(message("headers.X-Api-Key").contains("an API key"));
    }

    #[test]
    fn private_keys_and_aws_key_ids_are_found_in_any_field() {
        let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIB...\n-----END RSA PRIVATE KEY-----\n";
        let f = found(json!({"body": pem, "note": "id AKIAIOSFODNN7EXAMPLE here", "a b": ["ASIAIOSFODNN7EXAMPLE"]}));
        assert_eq!(f.len(), 3, "{f:?}");
        assert_eq!(f[0].0, r#"["a b"][0]"#);
        assert!(f[0].1.contains("an AWS access key id"));
        assert_eq!(f[1].0, "body");
        assert!(f[1].1.contains("a PEM private key"));
        assert_eq!(f[2].0, "note");
        // Never the value itself.
        assert!(f.iter().all(|(_, m)| !m.contains("AKIA") && !m.contains("MIIB")), "{f:?}");
    }

    #[test]
    fn lookalikes_are_not_secrets() {
        let input = json!({
            "body": "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
            "a": "AKIAIOSFODNN7EXAMPL",       // 15 characters after the prefix
            "b": "XAKIAIOSFODNN7EXAMPLE",     // inside a longer word
            "c": "AKIAIOSFODNN7EXAMPLE1",     // longer than an id
            "d": "akiaiosfodnn7example",
            "url": "https://example.com/?q=token",
            "tokens": 3,
        });
        assert_eq!(found(input), Vec::<(String, String)>::new());
    }

    proptest! {
        /// Arbitrary strings, as values or as field names, never panic the scanner.
        #[test]
        fn random_strings_never_panic(key in ".{0,40}", text in ".{0,200}", noise in "[A-Z0-9\\- ]{0,40}") {
            let mixed = format!("{noise}AKIA{noise}-----BEGIN {text}-----");
            let _ = scan(&json!({ key.clone(): text.clone(), "x": [mixed, {key: {"$secret": text}}] }));
        }
    }
}
