//! Input parsing shared by the executors. Every malformed input becomes a permanent
//! `INVALID_INPUT` whose message names the field but never repeats the value given, since
//! inputs may hold secrets (an `Authorization` header placed where a map was expected).

use std::fmt::Display;

use rara_domain::StepError;
use rara_domain::step_error::codes;
use serde::de::DeserializeOwned;

/// Parses `input` into `T` (a `deny_unknown_fields` struct).
pub(crate) fn parse<T: DeserializeOwned>(operation: &str, input: serde_json::Value) -> Result<T, StepError> {
    serde_path_to_error::deserialize(input).map_err(|err| {
        let path = err.path().to_string();
        let field = if path == "." { "input" } else { path.as_str() };
        invalid(operation, field, redact(&err.into_inner().to_string()))
    })
}

/// A permanent `INVALID_INPUT` naming `field`.
pub(crate) fn invalid(operation: &str, field: &str, problem: impl Display) -> StepError {
    StepError::permanent(codes::INVALID_INPUT, format!("{operation}: invalid input at `{field}`: {problem}"))
        .with_details(serde_json::json!({ "field": field }))
}

/// Drops the offending value from serde's "invalid type: string \"..\", expected .." messages.
fn redact(message: &str) -> String {
    for (prefix, replacement) in [("invalid type: ", "wrong type"), ("invalid value: ", "invalid value")] {
        if let Some(rest) = message.strip_prefix(prefix) {
            return match rest.rfind(", expected ") {
                Some(at) => format!("{replacement}{}", &rest[at..]),
                None => replacement.to_owned(),
            };
        }
    }
    message.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Example {
        name: String,
        #[serde(default)]
        tags: std::collections::BTreeMap<String, String>,
    }

    fn error(input: serde_json::Value) -> StepError {
        parse::<Example>("example", input).unwrap_err()
    }

    #[test]
    fn a_wrong_type_names_the_field_but_not_the_value() {
        let err = error(json!({ "name": "n", "tags": "Bearer s3cret" }));
        assert_eq!(err.code, codes::INVALID_INPUT);
        assert!(!err.retryable);
        assert!(err.message.contains("`tags`"), "{}", err.message);
        assert!(err.message.contains("expected a map"), "{}", err.message);
        assert!(!err.message.contains("s3cret"), "{}", err.message);
        assert_eq!(err.details, json!({ "field": "tags" }));
    }

    #[test]
    fn a_nested_wrong_type_names_the_path() {
        let err = error(json!({ "name": "n", "tags": { "authorization": 42 } }));
        assert!(err.message.contains("`tags.authorization`"), "{}", err.message);
        assert!(!err.message.contains("42"), "{}", err.message);
    }

    #[test]
    fn missing_and_unknown_fields_are_named() {
        assert!(error(json!({})).message.contains("missing field `name`"));
        let err = error(json!({ "name": "n", "nmae": "typo" }));
        assert!(err.message.contains("unknown field `nmae`"), "{}", err.message);
    }

    #[test]
    fn a_non_object_input_is_refused() {
        let err = error(json!("just a string"));
        assert!(err.message.contains("`input`"), "{}", err.message);
        assert!(!err.message.contains("just a string"), "{}", err.message);
    }
}
