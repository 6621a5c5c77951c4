//! Format 1: one step, `{"v": 1, "step_id": "<uuid>", "lease_token": "<uuid>"}`.

use uuid::Uuid;

use super::json::{canonical_uuid, fields, kind, object};
use super::{Error, FORMAT_VERSION, MAX_BODY_BYTES, StepMessage};

/// The fields format 1 has, in the order they are checked.
const FIELDS: [&str; 3] = ["v", "step_id", "lease_token"];

impl StepMessage {
    pub fn new(step_id: Uuid, lease_token: Uuid) -> Self {
        StepMessage { v: FORMAT_VERSION, step_id, lease_token }
    }

    pub fn to_body(&self) -> String {
        // Serializing two UUIDs and an integer cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parses a format-1 body strictly: its size, then JSON and its shape (one object, no
    /// field twice, no field the format lacks), then the version, then the ids, which must be
    /// spelt as the scheduler writes them (lower-case, hyphenated). Each rejection names what
    /// is wrong and the field, and never echoes a value from the body.
    pub fn parse(body: &str) -> Result<Self, Error> {
        if body.len() > MAX_BODY_BYTES {
            return Err(Error::TooLarge(body.len()));
        }
        let (object, keys) = object(body)?;
        single(&object, &keys)
    }
}

/// A format-1 body's message.
pub(super) fn single(
    object: &serde_json::Map<String, serde_json::Value>,
    keys: &[String],
) -> Result<StepMessage, Error> {
    fields(keys, &FIELDS, "`v`, `step_id` and `lease_token`")?;
    version(object.get("v"))?;
    Ok(StepMessage {
        v: FORMAT_VERSION,
        step_id: canonical_uuid("step_id", object.get("step_id"))?,
        lease_token: canonical_uuid("lease_token", object.get("lease_token"))?,
    })
}

/// `v`: present, a whole number, and the version this build reads.
fn version(v: Option<&serde_json::Value>) -> Result<(), Error> {
    let what = "`v` (the format version) must be a whole number";
    match v {
        None => Err(Error::Malformed("missing field `v` (the format version)".into())),
        Some(serde_json::Value::Number(n)) => match n.as_u64() {
            Some(v) if v == u64::from(FORMAT_VERSION) => Ok(()),
            Some(v) => Err(Error::UnsupportedVersion(v)),
            None if n.is_i64() => Err(Error::Malformed(format!("{what} of at least 1, found a negative number"))),
            None => Err(Error::Malformed(format!("{what}, found a fraction or a number out of range"))),
        },
        Some(other) => Err(Error::Malformed(format!("{what}, found {}", kind(other)))),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

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

    #[test]
    fn each_wrong_body_gets_the_reason_that_names_its_fault() {
        let id = "0190a1b2-0000-7000-8000-000000000001";
        let with_v = |v: &str| format!(r#"{{"v":{v},"step_id":"{id}","lease_token":"{id}"}}"#);
        let reason = |body: &str| StepMessage::parse(body).unwrap_err().to_string();
        for v in ["-1", "1.0", "1.5", "18446744073709551617"] {
            let r = reason(&with_v(v));
            assert!(r.contains("`v`") && r.contains("whole number") && !r.contains("4294967295"), "v = {v}: {r}");
        }
        assert_eq!(StepMessage::parse(&with_v("7")), Err(Error::UnsupportedVersion(7)));
        assert!(reason(&with_v("null")).contains("`v` (the format version) must be a whole number, found null"));
        assert!(reason("[1,2,3]").contains("must be a JSON object, found an array"));
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(reason(&deep).contains("nested deeper than 128 levels"), "{}", reason(&deep));
        let twice = format!(r#"{{"v":1,"step_id":"{id}","step_id":"{id}","lease_token":"{id}"}}"#);
        assert!(reason(&twice).contains("field `step_id` appears more than once"), "{}", reason(&twice));
        let number = format!(r#"{{"v":1,"step_id":5,"lease_token":"{id}"}}"#);
        assert!(reason(&number).contains("`step_id` must be a UUID string, found a number"));
    }

    #[test]
    fn only_the_canonical_spelling_of_a_token_is_a_token() {
        let id = Uuid::new_v4();
        let body = |token: String| format!(r#"{{"v":1,"step_id":"{id}","lease_token":"{token}"}}"#);
        assert!(StepMessage::parse(&body(id.to_string())).is_ok());
        for other in
            [id.to_string().to_uppercase(), id.braced().to_string(), id.urn().to_string(), id.simple().to_string()]
        {
            let err = StepMessage::parse(&body(other.clone())).unwrap_err();
            assert_eq!(err.code(), "MALFORMED_MESSAGE", "{other}");
            assert!(err.to_string().contains("`lease_token` must be a UUID spelt as rara writes it"), "{err}");
        }
    }
    /// A generated field: mostly a valid UUID in its canonical spelling; else another
    /// spelling of a real UUID (refused: one spelling only), or junk.
    fn uuid_field() -> impl Strategy<Value = (String, Option<Uuid>)> {
        let valid = any::<u128>().prop_map(Uuid::from_u128);
        prop_oneof![
            6 => valid.clone().prop_map(|u| (u.to_string(), Some(u))),
            1 => valid.clone().prop_map(|u| (u.simple().to_string(), None)),
            1 => valid.clone().prop_map(|u| (u.to_string().to_uppercase(), None)),
            1 => valid.clone().prop_map(|u| (u.braced().to_string(), None)),
            1 => valid.prop_map(|u| (u.urn().to_string(), None)),
            2 => "[a-z0-9-]{0,40}".prop_map(|s| {
                let parsed = Uuid::try_parse(&s).ok().filter(|u| u.to_string() == s);
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
                (v, _, _) if v < 0 => prop_assert_eq!(parsed.map_err(|e| e.code()), Err("MALFORMED_MESSAGE")),
                (v, _, _) => prop_assert_eq!(parsed, Err(Error::UnsupportedVersion(v as u64))),
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
