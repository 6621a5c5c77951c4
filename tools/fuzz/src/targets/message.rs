//! `message`: SQS bodies through [`parse_steps`] and [`StepMessage::parse`]: bodies built as
//! the scheduler writes them (formats 1 and 2) then mutated at the field and at the byte, and
//! raw text. Invariants: no panic; a body [`StepMessage::parse`] accepts, [`parse_steps`]
//! accepts as the same one step; an accepted body names 1 to [`MAX_STEPS_PER_MESSAGE`] steps
//! and re-encodes ([`encode_steps`]) to a body that parses to the same steps (a single step's
//! `traceparent` travels as an attribute, not in the body); a refusal never echoes the body.

use proptest::prelude::*;
use rara_queue::message::{Error, MAX_STEPS_PER_MESSAGE};
use rara_queue::{MessageStep, StepMessage, encode_steps, parse_steps};
use serde_json::{Value, json};
use uuid::Uuid;

use super::values::{edge_number, json_value};
use crate::runner::Target;

/// The longest run of a body a refusal may hold (a field name is cut to 64 characters).
const ECHO: usize = 65;

#[derive(Debug)]
pub struct Message;

/// A UUID as text: mostly canonical, else another spelling or junk.
fn uuid_text() -> impl Strategy<Value = Value> {
    let id = any::<u128>().prop_map(Uuid::from_u128);
    prop_oneof![
        30 => id.clone().prop_map(|u| json!(u.to_string())),
        1 => id.clone().prop_map(|u| json!(u.simple().to_string())),
        1 => id.prop_map(|u| json!(u.to_string().to_uppercase())),
        1 => json_value(),
    ]
}

fn traceparent() -> impl Strategy<Value = Value> {
    prop_oneof![
        12 => "00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]".prop_map(Value::String),
        2 => Just(Value::Null),
        1 => "[!-~]{0,140}".prop_map(Value::String),
        1 => json_value(),
    ]
}

/// A body as the scheduler writes it, then maybe one field changed, added or dropped.
fn structured_body() -> impl Strategy<Value = String> {
    let single = (uuid_text(), uuid_text()).prop_map(|(s, l)| json!({"v": 1, "step_id": s, "lease_token": l}));
    let entry = (uuid_text(), uuid_text(), prop::option::of(traceparent()))
        .prop_map(|(s, l, t)| match t {
            Some(t) => json!([s, l, t]),
            None => json!([s, l]),
        })
        .boxed();
    let packed =
        prop_oneof![8 => prop::collection::vec(entry.clone(), 0..10), 1 => prop::collection::vec(entry, 95..110)]
            .prop_map(|steps| json!({"v": 2, "steps": steps}));
    let body = prop_oneof![single, packed];
    let mutation = prop_oneof![
        8 => Just(None),
        1 => ("[a-z_]{1,12}", json_value()).prop_map(Some),
        1 => (Just("v".to_owned()), edge_number()).prop_map(Some),
    ];
    (body, mutation, any::<bool>(), any::<prop::sample::Index>()).prop_map(|(mut body, mutation, drop, at)| {
        if let (Some((field, value)), Value::Object(object)) = (mutation, &mut body) {
            if drop && !object.is_empty() {
                let key = object.keys().nth(at.index(object.len())).cloned().unwrap_or_default();
                object.remove(&key);
            } else {
                object.insert(field, value);
            }
        }
        body.to_string()
    })
}

/// A body cut or with one byte replaced (still UTF-8: SQS bodies are text).
fn byte_mutated(body: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    (body, any::<prop::sample::Index>(), any::<char>(), any::<bool>()).prop_map(|(body, at, c, cut)| {
        let chars: Vec<char> = body.chars().collect();
        let i = at.index(chars.len().max(1)).min(chars.len());
        if cut {
            chars[..i].iter().collect()
        } else {
            chars[..i].iter().chain(std::iter::once(&c)).chain(chars.get(i + 1..).unwrap_or(&[])).collect()
        }
    })
}

impl Target for Message {
    type Input = String;

    fn name(&self) -> &'static str {
        "message"
    }

    fn inputs(&self) -> BoxedStrategy<String> {
        prop_oneof![
            6 => structured_body(),
            2 => byte_mutated(structured_body()),
            1 => ".{0,300}",
            1 => prop::collection::vec(any::<u8>(), 0..300).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
            1 => (1usize..20_000).prop_map(|n| format!(r#"{{"v":2,"steps":{}}}"#, "[".repeat(n))),
        ]
        .boxed()
    }

    fn check(&self, body: String) -> Result<String, String> {
        if let Ok(single) = StepMessage::parse(&body) {
            let steps = parse_steps(&body).map_err(|e| format!("format 1 accepted, parse_steps refused: {e}"))?;
            if steps != [MessageStep { message: single, traceparent: None }] {
                return Err(format!("format 1 accepted as {single:?}, parse_steps read {steps:?}"));
            }
        }
        match parse_steps(&body) {
            Ok(steps) => accepted(&steps),
            Err(error) => refused(&body, &error),
        }
    }
}

fn accepted(steps: &[MessageStep]) -> Result<String, String> {
    if steps.is_empty() || steps.len() > MAX_STEPS_PER_MESSAGE {
        return Err(format!("accepted {} steps", steps.len()));
    }
    let again = parse_steps(&encode_steps(steps)).map_err(|e| format!("re-encoded body refused: {e}"))?;
    let expected: Vec<MessageStep> = match steps {
        [one] => vec![MessageStep { traceparent: None, ..one.clone() }],
        _ => steps.to_vec(),
    };
    if again != expected {
        return Err(format!("round trip changed the steps: {steps:?} became {again:?}"));
    }
    Ok(if steps.len() == 1 { "accepted: one step" } else { "accepted: packed" }.into())
}

fn refused(body: &str, error: &Error) -> Result<String, String> {
    let text = error.to_string();
    // A refusal may name a field (cut to 64 characters), never repeat a value: look for any
    // longer run of the body.
    let echoed = text.as_bytes().windows(ECHO).any(|w| std::str::from_utf8(w).is_ok_and(|w| body.contains(w)));
    if echoed {
        return Err(format!("the refusal echoes the body: {text}"));
    }
    let class = match error {
        Error::Malformed(m) => format!("refused: {}", m.split([':', '(', ',']).next().unwrap_or_default().trim()),
        other => format!("refused: {}", other.code()),
    };
    // One class per rule, not per entry or field: indices and names left out.
    let class: String = class.chars().filter(|c| !c.is_ascii_digit()).take(60).collect();
    Ok(class.split('`').step_by(2).collect::<Vec<_>>().join("`…`"))
}
