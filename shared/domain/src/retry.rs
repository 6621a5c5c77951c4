//! The retry policy: exponential backoff with full jitter, bounded by a maximum delay and
//! a maximum number of attempts; some error codes are never retried.

use std::time::Duration;

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::StepError;

/// How a step is retried. Stored per step at submission (defaults come from config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Executions allowed in all, the first one included.
    pub max_attempts: u32,
    /// The backoff ceiling before the first retry.
    pub initial_delay: Duration,
    /// No delay exceeds this.
    pub max_delay: Duration,
    /// The ceiling grows by this factor per attempt (≥ 1).
    pub multiplier: f64,
    /// Error codes never retried, whatever their retryable flag says.
    pub non_retryable_codes: Vec<String>,
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RetryDecision {
    /// Run attempt n + 1 after this delay.
    RetryAfter(Duration),
    /// Fail the step for good.
    Fail,
}

impl RetryPolicy {
    /// The backoff ceiling after `attempt` (1-based) failed: `initial × multiplier^(attempt-1)`,
    /// capped at `max_delay`.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(1).min(64) as i32;
        let secs = self.initial_delay.as_secs_f64() * self.multiplier.powi(exponent);
        let capped = secs.min(self.max_delay.as_secs_f64());
        Duration::try_from_secs_f64(capped).unwrap_or(self.max_delay)
    }

    /// Full jitter: a delay drawn uniformly from `[0, ceiling(attempt)]`.
    pub fn delay(&self, attempt: u32, rng: &mut impl Rng) -> Duration {
        let ceiling = self.ceiling(attempt).as_millis() as u64;
        Duration::from_millis(rng.random_range(0..=ceiling))
    }

    /// Decide after attempt number `attempt` (1-based) failed with `error`. An error whose
    /// details carry `retry_after_seconds` (a non-negative number: an executor that knows when
    /// to come back, e.g. `http.request` from a `Retry-After` header) sets the delay exactly,
    /// instead of the backoff, up to [`MAX_RETRY_AFTER`].
    pub fn decide(&self, attempt: u32, error: &StepError, rng: &mut impl Rng) -> RetryDecision {
        let retryable = error.retryable && !self.non_retryable_codes.iter().any(|c| c == &error.code);
        if retryable && attempt < self.max_attempts {
            if let Some(after) = retry_after(error) {
                return RetryDecision::RetryAfter(after);
            }
            RetryDecision::RetryAfter(self.delay(attempt, rng))
        } else {
            RetryDecision::Fail
        }
    }
}

/// The longest `retry_after_seconds` honoured (a day, the longest step timeout).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// The error detail `retry_after_seconds`, if it is a non-negative number, clamped to
/// [`MAX_RETRY_AFTER`] before it becomes a `Duration` (a third party sets it: `Retry-After:
/// 18446744073709551615` or `1e300` must not panic the conversion).
fn retry_after(error: &StepError) -> Option<Duration> {
    let seconds = error.details.get("retry_after_seconds")?.as_f64()?;
    if !(seconds.is_finite() && seconds >= 0.0) {
        return None;
    }
    Duration::try_from_secs_f64(seconds.min(MAX_RETRY_AFTER.as_secs_f64())).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 5,
            initial_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(60),
            multiplier: 2.0,
            non_retryable_codes: vec!["BAD_REQUEST".into()],
        }
    }

    #[test]
    fn ceiling_grows_exponentially_and_caps() {
        let p = policy();
        assert_eq!(p.ceiling(1), Duration::from_secs(1));
        assert_eq!(p.ceiling(2), Duration::from_secs(2));
        assert_eq!(p.ceiling(4), Duration::from_secs(8));
        assert_eq!(p.ceiling(30), Duration::from_secs(60));
        assert_eq!(p.ceiling(u32::MAX), Duration::from_secs(60));
    }

    #[test]
    fn no_retry_when_attempts_are_used_up_or_error_is_permanent() {
        let p = policy();
        let mut rng = StdRng::seed_from_u64(7);
        let transient = StepError::retryable("TIMEOUT", "slow");
        assert!(matches!(p.decide(4, &transient, &mut rng), RetryDecision::RetryAfter(_)));
        assert_eq!(p.decide(5, &transient, &mut rng), RetryDecision::Fail);
        assert_eq!(p.decide(1, &StepError::permanent("X", "no"), &mut rng), RetryDecision::Fail);
        let listed = StepError::retryable("BAD_REQUEST", "listed as never retried");
        assert_eq!(p.decide(1, &listed, &mut rng), RetryDecision::Fail);
    }

    proptest! {
        #[test]
        fn jittered_delay_never_exceeds_ceiling(attempt in 1u32..100, seed in any::<u64>()) {
            let p = policy();
            let mut rng = StdRng::seed_from_u64(seed);
            let d = p.delay(attempt, &mut rng);
            prop_assert!(d <= p.ceiling(attempt));
            prop_assert!(d <= p.max_delay);
        }
    }

    #[test]
    fn retry_after_seconds_sets_the_delay_exactly() {
        let mut rng = StdRng::seed_from_u64(7);
        let error =
            StepError::retryable("HTTP_4XX", "429").with_details(serde_json::json!({"retry_after_seconds": 7.5}));
        assert_eq!(policy().decide(1, &error, &mut rng), RetryDecision::RetryAfter(Duration::from_millis(7500)));
        let huge = StepError::retryable("X", "x").with_details(serde_json::json!({"retry_after_seconds": 1e12}));
        assert_eq!(policy().decide(1, &huge, &mut rng), RetryDecision::RetryAfter(MAX_RETRY_AFTER));
        for ignored in
            [serde_json::json!({"retry_after_seconds": -1}), serde_json::json!({"retry_after_seconds": "soon"})]
        {
            let error = StepError::retryable("X", "x").with_details(ignored);
            let RetryDecision::RetryAfter(d) = policy().decide(1, &error, &mut rng) else { panic!("retries") };
            assert!(d <= policy().ceiling(1), "the backoff applies");
        }
        let last = StepError::retryable("X", "x").with_details(serde_json::json!({"retry_after_seconds": 1}));
        assert_eq!(policy().decide(5, &last, &mut rng), RetryDecision::Fail, "no attempts left");
    }

    /// Found by rara-fuzz (target `retry`): `Duration::from_secs_f64` panicked on these before
    /// the clamp to a day was applied.
    #[test]
    fn a_retry_after_too_large_for_a_duration_is_clamped_not_a_panic() {
        let mut rng = StdRng::seed_from_u64(7);
        let u64_max: serde_json::Value = serde_json::from_str("18446744073709551615").unwrap();
        let beyond: serde_json::Value = serde_json::from_str("1e19").unwrap();
        for seconds in [u64_max, beyond, serde_json::json!(1e300), serde_json::json!(f64::MAX)] {
            let error =
                StepError::retryable("X", "x").with_details(serde_json::json!({"retry_after_seconds": seconds}));
            assert_eq!(policy().decide(1, &error, &mut rng), RetryDecision::RetryAfter(MAX_RETRY_AFTER), "{seconds}");
        }
        let nan_as_text =
            StepError::retryable("X", "x").with_details(serde_json::json!({"retry_after_seconds": "NaN"}));
        let RetryDecision::RetryAfter(d) = policy().decide(1, &nan_as_text, &mut rng) else { panic!("retries") };
        assert!(d <= policy().ceiling(1), "not a number: the backoff applies");
    }
}
