//! The step message: `{"v": 1, "step_id": "<uuid>", "lease_token": "<uuid>"}`.
//! Only identifiers travel: no input, no secret. Anything else is rejected with a reason.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The message format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// A step message is under 200 bytes; anything much larger is not one of ours.
pub const MAX_BODY_BYTES: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepMessage {
    pub v: u32,
    pub step_id: Uuid,
    pub lease_token: Uuid,
}

/// Why a body is not a step message. The reason travels with the message to the DLQ.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("message body of {0} bytes exceeds the {MAX_BODY_BYTES}-byte limit of a step message")]
    TooLarge(usize),
    #[error("message format version {0} is not supported (this build reads version {FORMAT_VERSION})")]
    UnsupportedVersion(u32),
    #[error("malformed step message: {0}")]
    Malformed(String),
}

impl Error {
    /// A stable code for metrics and the DLQ reason attribute.
    pub fn code(&self) -> &'static str {
        match self {
            Error::TooLarge(_) => "MESSAGE_TOO_LARGE",
            Error::UnsupportedVersion(_) => "UNSUPPORTED_MESSAGE_VERSION",
            Error::Malformed(_) => "MALFORMED_MESSAGE",
        }
    }
}

impl StepMessage {
    pub fn new(step_id: Uuid, lease_token: Uuid) -> Self {
        StepMessage { v: FORMAT_VERSION, step_id, lease_token }
    }

    pub fn to_body(&self) -> String {
        // Serializing two UUIDs and an integer cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parses a body strictly: size first, then the version, then the fields.
    pub fn parse(body: &str) -> Result<Self, Error> {
        if body.len() > MAX_BODY_BYTES {
            return Err(Error::TooLarge(body.len()));
        }
        #[derive(Deserialize)]
        struct Versioned {
            v: Option<serde_json::Value>,
        }
        let versioned: Versioned = serde_json::from_str(body).map_err(malformed)?;
        match versioned.v {
            None => return Err(Error::Malformed("missing field `v` (the format version)".into())),
            Some(serde_json::Value::Number(n)) if n.as_u64() == Some(u64::from(FORMAT_VERSION)) => {}
            Some(serde_json::Value::Number(n)) => {
                return Err(Error::UnsupportedVersion(
                    n.as_u64().and_then(|v| u32::try_from(v).ok()).unwrap_or(u32::MAX),
                ));
            }
            Some(_) => return Err(Error::Malformed("`v` must be a number".into())),
        }
        serde_json::from_str(body).map_err(malformed)
    }
}

/// A parse error that names fields and positions but never echoes a value from the body
/// (a poisoned message could carry anything, and the reason is logged).
fn malformed(e: serde_json::Error) -> Error {
    let text = e.to_string();
    if text.starts_with("unknown field") || text.starts_with("missing field") {
        return Error::Malformed(text);
    }
    let kind = match e.classify() {
        serde_json::error::Category::Syntax => "not valid JSON",
        serde_json::error::Category::Eof => "truncated JSON",
        serde_json::error::Category::Data => "a field has the wrong type or format",
        serde_json::error::Category::Io => "unreadable",
    };
    Error::Malformed(format!("{kind} (line {}, column {})", e.line(), e.column()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trips() {
        let m = StepMessage::new(Uuid::new_v4(), Uuid::new_v4());
        assert_eq!(StepMessage::parse(&m.to_body()), Ok(m));
    }

    #[test]
    fn rejections_never_echo_values() {
        let err = StepMessage::parse(r#"{"v":1,"step_id":"hunter2-secret","lease_token":"x"}"#).unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
        let err = StepMessage::parse(r#"{"v":"hunter2"}"#).unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }

    #[test]
    fn rejections_say_why() {
        let id = Uuid::new_v4();
        assert_eq!(
            StepMessage::parse(&format!(r#"{{"v":2,"step_id":"{id}","lease_token":"{id}"}}"#)),
            Err(Error::UnsupportedVersion(2))
        );
        assert!(matches!(StepMessage::parse("not json"), Err(Error::Malformed(_))));
        assert!(matches!(StepMessage::parse(r#"{"step_id":"x"}"#), Err(Error::Malformed(m)) if m.contains("`v`")));
        let extra = format!(r#"{{"v":1,"step_id":"{id}","lease_token":"{id}","input":{{"password":"x"}}}}"#);
        assert!(matches!(StepMessage::parse(&extra), Err(Error::Malformed(m)) if m.contains("input")));
        assert_eq!(StepMessage::parse(&"x".repeat(MAX_BODY_BYTES + 1)), Err(Error::TooLarge(MAX_BODY_BYTES + 1)));
    }

    /// A generated field: mostly a valid UUID (in any spelling `Uuid` reads), else junk.
    fn uuid_field() -> impl Strategy<Value = (String, Option<Uuid>)> {
        let valid = any::<u128>().prop_map(Uuid::from_u128);
        prop_oneof![
            6 => valid.clone().prop_map(|u| (u.to_string(), Some(u))),
            1 => valid.prop_map(|u| (u.simple().to_string(), Some(u))),
            2 => "[a-z0-9-]{0,40}".prop_map(|s| {
                let parsed = Uuid::try_parse(&s).ok();
                (s, parsed)
            }),
        ]
    }

    proptest! {
        #[test]
        fn arbitrary_bodies_never_panic(body in ".{0,300}") {
            let _ = StepMessage::parse(&body);
        }

        /// A body is a message exactly when `v` is 1 and both ids are UUIDs, and then it
        /// carries those ids; otherwise the error says which rule it broke.
        #[test]
        fn a_body_is_a_message_exactly_when_version_and_ids_are_valid(
            v in prop_oneof![3 => Just(1i64), 1 => any::<i64>()],
            (step_text, step_id) in uuid_field(),
            (token_text, lease_token) in uuid_field(),
            lease_token_first in any::<bool>(),
        ) {
            let fields = [format!(r#""step_id":"{step_text}""#), format!(r#""lease_token":"{token_text}""#)];
            let [a, b] = if lease_token_first { [&fields[1], &fields[0]] } else { [&fields[0], &fields[1]] };
            let body = format!(r#"{{"v":{v},{a},{b}}}"#);
            let parsed = StepMessage::parse(&body);
            match (v, step_id, lease_token) {
                (1, Some(step_id), Some(lease_token)) => {
                    prop_assert_eq!(parsed, Ok(StepMessage { v: 1, step_id, lease_token }));
                }
                (1, _, _) => prop_assert_eq!(parsed.map_err(|e| e.code()), Err("MALFORMED_MESSAGE")),
                _ => prop_assert_eq!(parsed.map_err(|e| e.code()), Err("UNSUPPORTED_MESSAGE_VERSION")),
            }
        }

        #[test]
        fn every_message_round_trips_through_its_body(step_id in any::<u128>(), lease_token in any::<u128>()) {
            let m = StepMessage::new(Uuid::from_u128(step_id), Uuid::from_u128(lease_token));
            let body = m.to_body();
            prop_assert!(body.len() < 200, "{} bytes", body.len());
            prop_assert_eq!(StepMessage::parse(&body), Ok(m));
        }
    }
}
