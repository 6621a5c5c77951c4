//! Retry decisions over any policy and any error details: no panic, and every delay within
//! its bound (`max_delay` for a backoff, [`MAX_RETRY_AFTER`] for `retry_after_seconds`).
//! `make fuzz` (target `retry`) runs the same at scale.

use std::time::Duration;

use proptest::prelude::*;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rara_domain::StepError;
use rara_domain::retry::{MAX_RETRY_AFTER, RetryDecision, RetryPolicy};
use serde_json::{Value, json};

fn retry_after() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(vec![
            json!(u64::MAX),
            json!(1e300),
            json!(f64::MAX),
            json!(-1),
            json!(i64::MIN),
            json!(0)
        ]),
        any::<f64>().prop_map(|f| json!(f)),
        any::<u64>().prop_map(|n| json!(n)),
        prop::sample::select(vec!["NaN", "inf", "1e300", "18446744073709551615", ""]).prop_map(|s| json!(s)),
    ]
}

fn policy() -> impl Strategy<Value = RetryPolicy> {
    let duration = prop_oneof![
        (0u64..3_600).prop_map(Duration::from_secs),
        any::<u64>().prop_map(Duration::from_secs),
        Just(Duration::MAX)
    ];
    let multiplier = prop_oneof![1.0f64..10.0, any::<f64>()];
    (1u32..20, duration.clone(), duration, multiplier).prop_map(
        |(max_attempts, initial_delay, max_delay, multiplier)| RetryPolicy {
            max_attempts,
            initial_delay,
            max_delay,
            multiplier,
            non_retryable_codes: vec![],
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn a_delay_never_exceeds_its_bound(policy in policy(), attempt in 0u32..25, after in retry_after(), seed in any::<u64>()) {
        let error = StepError::retryable("X", "x").with_details(json!({ "retry_after_seconds": after }));
        let number = after.as_f64().filter(|s| *s >= 0.0);
        let decision = policy.decide(attempt, &error, &mut StdRng::seed_from_u64(seed));
        match (decision, number) {
            (RetryDecision::Fail, _) => prop_assert!(attempt >= policy.max_attempts),
            (RetryDecision::RetryAfter(delay), Some(seconds)) => {
                prop_assert!(delay <= MAX_RETRY_AFTER);
                prop_assert_eq!(delay, Duration::from_secs_f64(seconds.min(MAX_RETRY_AFTER.as_secs_f64())));
            }
            (RetryDecision::RetryAfter(delay), None) => prop_assert!(delay <= policy.max_delay),
        }
    }
}
