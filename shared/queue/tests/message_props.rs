//! Step messages of either format survive their body: what the scheduler encodes, an executor
//! parses back to the same steps, and a body that parses re-encodes to one that parses the
//! same. `make fuzz` (target `message`) runs the same at scale with mutated bodies.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use rara_queue::message::MAX_STEPS_PER_MESSAGE;
use rara_queue::{MessageStep, StepMessage, encode_steps, parse_steps};
use uuid::Uuid;

fn step() -> impl Strategy<Value = MessageStep> {
    (any::<u128>(), any::<u128>(), prop::option::of("00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]")).prop_map(
        |(step_id, lease_token, traceparent)| MessageStep {
            message: StepMessage::new(Uuid::from_u128(step_id), Uuid::from_u128(lease_token)),
            traceparent,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn encoded_steps_parse_back_to_the_same_steps(steps in prop::collection::vec(step(), 1..=MAX_STEPS_PER_MESSAGE)) {
        let parsed = parse_steps(&encode_steps(&steps)).unwrap();
        // One step is written in format 1: its traceparent travels as the message's attribute.
        let expected: Vec<MessageStep> = match steps.as_slice() {
            [one] => vec![MessageStep { traceparent: None, ..one.clone() }],
            _ => steps.clone(),
        };
        prop_assert_eq!(parsed, expected);
    }

    #[test]
    fn a_body_that_parses_re_encodes_to_the_same_steps(steps in prop::collection::vec(step(), 2..6), spaces in " {0,3}") {
        // An equivalent body spelt differently (spaces after the separators) parses the same.
        let body = encode_steps(&steps).replace(',', &format!(",{spaces}")).replace(':', &format!(":{spaces}"));
        let parsed = parse_steps(&body).unwrap();
        prop_assert_eq!(&parsed, &steps);
        prop_assert_eq!(parse_steps(&encode_steps(&parsed)).unwrap(), parsed);
    }
}
