//! The step message. Format 1 names one step: `{"v": 1, "step_id": "<uuid>", "lease_token":
//! "<uuid>"}`, its run's `traceparent` in a message attribute. Format 2 names several (a
//! scheduler with `RARA_STEPS_PER_MESSAGE` above 1 packs a lease round's steps, so that an
//! executor batch of ten messages claims and records up to ten times as many steps with the
//! same statements): `{"v": 2, "steps": [["<step id>", "<lease token>", "<traceparent>" or
//! null], …]}`. Only identifiers travel: no input, no secret. Anything else is rejected with a
//! reason. [`parse_steps`] reads both; [`encode_steps`] writes format 1 for one step, so a
//! scheduler that packs nothing writes what every earlier executor reads.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The format of a message that names one step.
pub const FORMAT_VERSION: u32 = 1;
/// The format of a message that names several steps.
pub const PACKED_VERSION: u32 = 2;
/// A step message is under 200 bytes; anything much larger is not one of ours.
pub const MAX_BODY_BYTES: usize = 4096;
/// The most steps one message names (`RARA_STEPS_PER_MESSAGE` is at most this).
pub const MAX_STEPS_PER_MESSAGE: usize = 100;
/// A packed step is under 140 bytes (two ids and a `traceparent`): the largest packed body.
pub const MAX_PACKED_BODY_BYTES: usize = 16 * 1024;
/// The longest `traceparent` a packed step may carry (W3C version 00 spells 55 characters).
const MAX_TRACEPARENT: usize = 128;

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
    #[error(
        "message format version {0} is not supported (this build reads versions {FORMAT_VERSION} and {PACKED_VERSION})"
    )]
    UnsupportedVersion(u64),
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

/// The fields format 1 has, in the order they are checked.
const FIELDS: [&str; 3] = ["v", "step_id", "lease_token"];
/// The fields format 2 has.
const PACKED_FIELDS: [&str; 2] = ["v", "steps"];
/// serde_json's nesting limit: a deeper body is refused as too deep, not as bad JSON.
const MAX_DEPTH: usize = 128;

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

/// One step a message names, with its run's `traceparent` when the body carries it (format 2;
/// a format-1 message carries it as an attribute).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageStep {
    pub message: StepMessage,
    pub traceparent: Option<String>,
}

/// The body of a message naming `steps`: format 1 for one step (its `traceparent` travels as
/// the message's attribute), format 2 for more (each with its own).
pub fn encode_steps(steps: &[MessageStep]) -> String {
    match steps {
        [one] => one.message.to_body(),
        _ => {
            #[derive(Serialize)]
            struct Packed<'a> {
                v: u32,
                steps: Vec<(Uuid, Uuid, Option<&'a str>)>,
            }
            let steps = steps.iter().map(|s| (s.message.step_id, s.message.lease_token, s.traceparent.as_deref()));
            // Ids and short strings cannot fail to serialize.
            serde_json::to_string(&Packed { v: PACKED_VERSION, steps: steps.collect() }).unwrap_or_default()
        }
    }
}

/// Parses a body of either format strictly (as [`StepMessage::parse`]; format 2: exactly `v`
/// and `steps`, one to [`MAX_STEPS_PER_MESSAGE`] entries, each `[step_id, lease_token]` or
/// `[step_id, lease_token, traceparent or null]`). A rejection names the entry at fault.
pub fn parse_steps(body: &str) -> Result<Vec<MessageStep>, Error> {
    if body.len() > MAX_PACKED_BODY_BYTES {
        return Err(Error::TooLarge(body.len()));
    }
    let (object, keys) = object(body)?;
    let packed = object.get("v").and_then(serde_json::Value::as_u64) == Some(u64::from(PACKED_VERSION));
    if !packed {
        if body.len() > MAX_BODY_BYTES {
            return Err(Error::TooLarge(body.len()));
        }
        return Ok(vec![MessageStep { message: single(&object, &keys)?, traceparent: None }]);
    }
    fields(&keys, &PACKED_FIELDS, "`v` and `steps`")?;
    let steps = match object.get("steps") {
        None => return Err(Error::Malformed("missing field `steps`".into())),
        Some(serde_json::Value::Array(steps)) => steps,
        Some(other) => return Err(Error::Malformed(format!("`steps` must be an array, found {}", kind(other)))),
    };
    if steps.is_empty() || steps.len() > MAX_STEPS_PER_MESSAGE {
        return Err(Error::Malformed(format!(
            "`steps` must hold 1 to {MAX_STEPS_PER_MESSAGE} steps, found {}",
            steps.len()
        )));
    }
    steps.iter().enumerate().map(|(i, step)| packed_step(i, step)).collect()
}

/// One entry of a format-2 body.
fn packed_step(i: usize, step: &serde_json::Value) -> Result<MessageStep, Error> {
    let shape = "must be [step_id, lease_token] or [step_id, lease_token, traceparent]";
    let entry = match step {
        serde_json::Value::Array(entry) if (2..=3).contains(&entry.len()) => entry,
        serde_json::Value::Array(entry) => {
            return Err(Error::Malformed(format!("`steps[{i}]` {shape}, found {} elements", entry.len())));
        }
        other => return Err(Error::Malformed(format!("`steps[{i}]` {shape}, found {}", kind(other)))),
    };
    let traceparent = match entry.get(2) {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(t)) if t.len() <= MAX_TRACEPARENT && t.bytes().all(|b| b.is_ascii_graphic()) => {
            Some(t.clone())
        }
        Some(serde_json::Value::String(_)) => {
            return Err(Error::Malformed(format!(
                "`steps[{i}]`'s traceparent must be at most {MAX_TRACEPARENT} printable ASCII characters"
            )));
        }
        Some(other) => {
            return Err(Error::Malformed(format!(
                "`steps[{i}]`'s traceparent must be a string or null, found {}",
                kind(other)
            )));
        }
    };
    Ok(MessageStep {
        message: StepMessage {
            v: FORMAT_VERSION,
            step_id: canonical_uuid(&format!("steps[{i}]`'s `step_id"), entry.first())?,
            lease_token: canonical_uuid(&format!("steps[{i}]`'s `lease_token"), entry.get(1))?,
        },
        traceparent,
    })
}

/// A body's top-level object and its keys (in order, with repeats).
fn object(body: &str) -> Result<(serde_json::Map<String, serde_json::Value>, Vec<String>), Error> {
    let value: serde_json::Value = serde_json::from_str(body).map_err(malformed)?;
    let serde_json::Value::Object(object) = value else {
        return Err(Error::Malformed(format!("the body must be a JSON object, found {}", kind(&value))));
    };
    // `Value` keeps the last of two equal keys: count them on the text.
    let keys: Vec<String> = serde_json::from_str::<Keys>(body).map_err(malformed)?.0;
    Ok((object, keys))
}

/// No field of `allowed` twice, no other field.
fn fields(keys: &[String], allowed: &[&str], named: &str) -> Result<(), Error> {
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

/// A format-1 body's message.
fn single(object: &serde_json::Map<String, serde_json::Value>, keys: &[String]) -> Result<StepMessage, Error> {
    fields(keys, &FIELDS, "`v`, `step_id` and `lease_token`")?;
    version(object.get("v"))?;
    Ok(StepMessage {
        v: FORMAT_VERSION,
        step_id: canonical_uuid("step_id", object.get("step_id"))?,
        lease_token: canonical_uuid("lease_token", object.get("lease_token"))?,
    })
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

fn kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
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

/// An id field: present, a string, and a UUID in its canonical spelling.
fn canonical_uuid(field: &str, value: Option<&serde_json::Value>) -> Result<Uuid, Error> {
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
fn malformed(e: serde_json::Error) -> Error {
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

    fn step(traceparent: Option<&str>) -> MessageStep {
        MessageStep {
            message: StepMessage::new(Uuid::new_v4(), Uuid::new_v4()),
            traceparent: traceparent.map(str::to_owned),
        }
    }

    #[test]
    fn one_step_is_written_in_format_1_and_several_in_format_2() {
        let one = step(Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
        let body = encode_steps(std::slice::from_ref(&one));
        assert_eq!(StepMessage::parse(&body), Ok(one.message), "an executor of format 1 reads it");
        assert_eq!(parse_steps(&body), Ok(vec![MessageStep { traceparent: None, ..one }]), "the attribute carries it");

        let many: Vec<MessageStep> =
            (0..MAX_STEPS_PER_MESSAGE).map(|i| step((i % 2 == 0).then_some("00-0af7-b7ad-01"))).collect();
        let body = encode_steps(&many);
        assert!(body.starts_with(r#"{"v":2,"steps":[[""#), "{body}");
        assert!(body.len() <= MAX_PACKED_BODY_BYTES, "{} bytes", body.len());
        assert_eq!(parse_steps(&body), Ok(many));
        assert_eq!(StepMessage::parse(&body).unwrap_err().code(), "MESSAGE_TOO_LARGE", "not a format-1 message");
    }

    #[test]
    fn each_wrong_packed_body_gets_the_reason_that_names_its_entry() {
        let id = "0190a1b2-0000-7000-8000-000000000001";
        let reason = |body: String| parse_steps(&body).unwrap_err().to_string();
        let cases = [
            (r#"{"v":2}"#.to_owned(), "missing field `steps`"),
            (r#"{"v":2,"steps":{}}"#.to_owned(), "`steps` must be an array, found an object"),
            (r#"{"v":2,"steps":[]}"#.to_owned(), "`steps` must hold 1 to 100 steps, found 0"),
            (format!(r#"{{"v":2,"steps":[["{id}","{id}"],["{id}"]]}}"#), "`steps[1]` must be [step_id, lease_token]"),
            (
                format!(r#"{{"v":2,"steps":[["{id}","{id}"],"{id}"]}}"#),
                "`steps[1]` must be [step_id, lease_token] or [step_id, lease_token, traceparent], found a string",
            ),
            (format!(r#"{{"v":2,"steps":[["{id}","hunter2"]]}}"#), "`steps[0]`'s `lease_token` is not a UUID"),
            (
                format!(r#"{{"v":2,"steps":[[7,"{id}"]]}}"#),
                "`steps[0]`'s `step_id` must be a UUID string, found a number",
            ),
            (format!(r#"{{"v":2,"steps":[["{id}","{id}",5]]}}"#), "`steps[0]`'s traceparent must be a string or null"),
            (format!(r#"{{"v":2,"steps":[["{id}","{id}","a b"]]}}"#), "printable ASCII"),
            (
                format!(r#"{{"v":2,"steps":[["{id}","{id}"]],"input":"x"}}"#),
                "unknown field `input`; a step message has only `v` and `steps`",
            ),
            (format!(r#"{{"v":2,"v":2,"steps":[["{id}","{id}"]]}}"#), "field `v` appears more than once"),
            (format!(r#"{{"v":3,"steps":[["{id}","{id}"]]}}"#), "unknown field `steps`"),
        ];
        for (body, expected) in cases {
            let r = reason(body.clone());
            assert!(r.contains(expected) && !r.contains("hunter2"), "{body}: {r}");
        }
        let many: Vec<String> = (0..=MAX_STEPS_PER_MESSAGE).map(|_| format!(r#"["{id}","{id}"]"#)).collect();
        assert!(reason(format!(r#"{{"v":2,"steps":[{}]}}"#, many.join(","))).contains("found 101"));
        assert_eq!(
            parse_steps(&"x".repeat(MAX_PACKED_BODY_BYTES + 1)),
            Err(Error::TooLarge(MAX_PACKED_BODY_BYTES + 1))
        );
        let padded = format!(r#"{{"v":1,"step_id":"{id}","lease_token":"{id}"{}}}"#, " ".repeat(MAX_BODY_BYTES));
        assert_eq!(parse_steps(&padded).unwrap_err().code(), "MESSAGE_TOO_LARGE", "format 1 keeps its limit");
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
        fn arbitrary_bodies_of_either_format_never_panic(body in ".{0,300}", steps in ".{0,300}") {
            let _ = parse_steps(&body);
            let _ = parse_steps(&format!(r#"{{"v":2,"steps":{steps}}}"#));
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
