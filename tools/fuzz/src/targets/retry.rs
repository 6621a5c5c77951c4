//! `retry`: [`RetryPolicy::decide`] with any policy (what the planner accepts and far beyond)
//! and any error, its `details` holding `retry_after_seconds` at every edge (`u64::MAX`,
//! `1e300`, negative, `"NaN"` as text, nested). Invariants: no panic; a failure is final
//! exactly when the error is permanent, listed, or the attempts are used up; a delay from
//! `retry_after_seconds` is the number clamped to [`MAX_RETRY_AFTER`], any other delay is within
//! the backoff ceiling and so within `max_delay`.

use std::time::Duration;

use proptest::prelude::*;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rara_domain::StepError;
use rara_domain::retry::{MAX_RETRY_AFTER, RetryDecision, RetryPolicy};
use serde_json::{Value, json};

use super::values::{edge_number, edge_text, json_value};
use crate::runner::Target;

#[derive(Debug)]
pub struct Retry;

#[derive(Debug, Clone)]
pub struct Input {
    pub policy: RetryPolicy,
    pub attempt: u32,
    pub error: StepError,
    pub rng_seed: u64,
}

/// Durations from nothing to the largest one, ordinary ones most often.
fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        4 => (0u64..3_600, 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
        1 => prop::sample::select(vec![Duration::ZERO, Duration::MAX, Duration::from_secs(u64::MAX / 1000),
            Duration::from_secs(10u64.pow(16)), Duration::from_secs(86_400)]),
        1 => (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
    ]
}

fn multiplier() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => 1.0f64..10.0,
        1 => prop::sample::select(vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -2.0, 0.0, 1e300, f64::MAX]),
        1 => any::<f64>(),
    ]
}

/// `details`: mostly an object with `retry_after_seconds` at an edge, else anything.
fn details() -> impl Strategy<Value = Value> {
    let retry_after = prop_oneof![
        4 => edge_number(),
        2 => edge_text().prop_map(Value::String),
        1 => json_value(),
    ];
    prop_oneof![
        4 => (retry_after, prop::collection::btree_map("[a-z_]{1,10}", json_value(), 0..3)).prop_map(|(after, rest)| {
            let mut details: serde_json::Map<String, Value> = rest.into_iter().collect();
            details.insert("retry_after_seconds".into(), after);
            Value::Object(details)
        }),
        1 => json_value(),
        1 => Just(json!({})),
    ]
}

impl Target for Retry {
    type Input = Input;

    fn name(&self) -> &'static str {
        "retry"
    }

    fn inputs(&self) -> BoxedStrategy<Input> {
        let codes = prop::collection::vec(prop::sample::select(vec!["BAD_REQUEST", "HTTP_4XX", "X"]), 0..2);
        let policy = (prop_oneof![4 => 1u32..10, 1 => any::<u32>()], duration(), duration(), multiplier(), codes)
            .prop_map(|(max_attempts, initial_delay, max_delay, multiplier, codes)| RetryPolicy {
                max_attempts,
                initial_delay,
                max_delay,
                multiplier,
                non_retryable_codes: codes.into_iter().map(str::to_owned).collect(),
            });
        let error = (
            prop::sample::select(vec!["HTTP_4XX", "BAD_REQUEST", "TIMEOUT", ""]),
            prop::bool::weighted(0.8),
            details(),
        )
            .prop_map(|(code, retryable, details)| StepError {
                code: code.to_owned(),
                message: "fuzzed".to_owned(),
                retryable,
                details,
            });
        let attempt = prop_oneof![8 => 1u32..4, 1 => 0u32..12, 1 => any::<u32>()];
        (policy, attempt, error, any::<u64>())
            .prop_map(|(policy, attempt, error, rng_seed)| Input { policy, attempt, error, rng_seed })
            .boxed()
    }

    fn check(&self, input: Input) -> Result<String, String> {
        let Input { policy, attempt, error, rng_seed } = input;
        let mut rng = StdRng::seed_from_u64(rng_seed);
        let decision = policy.decide(attempt, &error, &mut rng);
        let listed = policy.non_retryable_codes.contains(&error.code);
        let retries = error.retryable && !listed && attempt < policy.max_attempts;
        let after = error.details.get("retry_after_seconds").and_then(Value::as_f64).filter(|s| *s >= 0.0);
        match (decision, retries, after) {
            (RetryDecision::Fail, false, _) => Ok("fail".into()),
            (RetryDecision::Fail, true, _) => Err("a retryable error with attempts left failed".into()),
            (RetryDecision::RetryAfter(_), false, _) => Err(format!(
                "retried: retryable {}, listed {listed}, attempt {attempt} of {}",
                error.retryable, policy.max_attempts
            )),
            (RetryDecision::RetryAfter(delay), true, Some(seconds)) => {
                let expected = seconds.min(MAX_RETRY_AFTER.as_secs_f64());
                let close = (delay.as_secs_f64() - expected).abs() <= 1e-6 * expected.max(1.0);
                if delay > MAX_RETRY_AFTER || !close {
                    return Err(format!("retry_after_seconds {seconds} gave {delay:?}, expected {expected} s"));
                }
                Ok(if seconds > MAX_RETRY_AFTER.as_secs_f64() { "retry after: clamped" } else { "retry after" }.into())
            }
            (RetryDecision::RetryAfter(delay), true, None) => {
                if delay > policy.ceiling(attempt) || delay > policy.max_delay {
                    return Err(format!("backoff {delay:?} above ceiling {:?}", policy.ceiling(attempt)));
                }
                Ok("backoff".into())
            }
        }
    }
}
