//! What the scheduler's handler tests share.
#![allow(dead_code)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lambda_runtime::{Context, LambdaEvent};
use rara_testkit::repo_root;

/// The committed scheduled event (`tests/fixtures/scheduled-event.json`), with an invocation
/// deadline 10 s from now.
pub fn scheduled_event() -> LambdaEvent<serde_json::Value> {
    let text = std::fs::read_to_string(repo_root().join("tests/fixtures/scheduled-event.json")).unwrap();
    let payload: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut context = Context::default();
    context.deadline =
        (SystemTime::now() + Duration::from_secs(10)).duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
    LambdaEvent::new(payload, context)
}
