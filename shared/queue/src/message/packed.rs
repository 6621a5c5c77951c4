//! Either format by the number of steps: format 1 for one (what every earlier executor reads),
//! format 2 for several: `{"v": 2, "steps": [["<step id>", "<lease token>", "<traceparent>" or
//! null], …]}`.

use serde::Serialize;
use uuid::Uuid;

use super::json::{canonical_uuid, fields, kind, object};
use super::single::single;
use super::{
    Error, FORMAT_VERSION, MAX_BODY_BYTES, MAX_PACKED_BODY_BYTES, MAX_STEPS_PER_MESSAGE, MessageStep, PACKED_VERSION,
    StepMessage,
};

/// The longest `traceparent` a packed step may carry (W3C version 00 spells 55 characters).
const MAX_TRACEPARENT: usize = 128;
/// The fields format 2 has.
const PACKED_FIELDS: [&str; 2] = ["v", "steps"];

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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

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

    proptest! {
        #[test]
        fn arbitrary_bodies_of_either_format_never_panic(body in ".{0,300}", steps in ".{0,300}") {
            let _ = parse_steps(&body);
            let _ = parse_steps(&format!(r#"{{"v":2,"steps":{steps}}}"#));
        }
    }
}
