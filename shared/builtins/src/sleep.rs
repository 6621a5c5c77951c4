//! `sleep`: input `{"seconds": S}` with `0 <= S <= 86400`; sleeps, reporting progress at most
//! twice a second, and returns `{"slept_seconds": S}`.
//!
//! It stops with a permanent `CANCELLED` when the step is cancelled, a retryable
//! `DEADLINE_EXCEEDED` when the deadline passes first, and a `CANCELLED` saying the lease was
//! lost when the reporter says so.

use std::time::Duration;

use rara_domain::StepError;
use rara_domain::executor::{ExecutionContext, Executor, ReportError};
use serde::Deserialize;
use tokio::time::Instant;

use crate::guard::{guard, lease_lost};
use crate::input;

/// The operation name.
pub const NAME: &str = "sleep";
/// The longest sleep accepted: one day.
pub const MAX_SECONDS: f64 = 86_400.0;
/// The time between two progress reports.
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(500);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object like {\"seconds\": 5}")]
struct Input {
    seconds: f64,
}

/// Sleeps for the given number of seconds.
#[derive(Debug, Default, Clone, Copy)]
pub struct Sleep;

#[async_trait::async_trait]
impl Executor for Sleep {
    async fn execute(&self, ctx: ExecutionContext, input: serde_json::Value) -> Result<serde_json::Value, StepError> {
        let Input { seconds } = input::parse(NAME, input)?;
        if !(0.0..=MAX_SECONDS).contains(&seconds) {
            return Err(input::invalid(NAME, "seconds", format_args!("must be between 0 and {MAX_SECONDS}")));
        }
        guard(&ctx, sleep_reporting(&ctx, seconds)).await?;
        Ok(serde_json::json!({ "slept_seconds": seconds }))
    }
}

async fn sleep_reporting(ctx: &ExecutionContext, seconds: f64) -> Result<(), StepError> {
    let total = Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let end = start + total;
    let mut next_report = start + PROGRESS_INTERVAL;
    while next_report < end {
        tokio::time::sleep_until(next_report).await;
        let slept = next_report - start;
        let message = format!("slept {:.1}s of {seconds}s", slept.as_secs_f64());
        match ctx.reporter.progress(slept.as_secs_f64() / seconds, &message).await {
            Ok(()) => {}
            Err(ReportError::LeaseLost) => return Err(lease_lost(NAME)),
            // Progress is advisory: a report that could not be stored does not stop the sleep.
            Err(err @ ReportError::Unavailable(_)) => tracing::debug!(error = %err, "sleep: progress not recorded"),
        }
        next_report += PROGRESS_INTERVAL;
    }
    tokio::time::sleep_until(end).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{RecordingReporter, context, context_with};
    use rara_domain::step_error::codes;
    use serde_json::json;

    #[tokio::test(start_paused = true)]
    async fn sleeps_for_the_given_time_and_reports_progress_twice_a_second() {
        let (ctx, reporter) = context();
        let start = Instant::now();
        let output = Sleep.execute(ctx, json!({ "seconds": 2 })).await.unwrap();
        assert_eq!(output, json!({ "slept_seconds": 2.0 }));
        assert_eq!(start.elapsed(), Duration::from_secs(2));
        let reports = reporter.reports();
        let fractions: Vec<f64> = reports.iter().map(|(f, _)| *f).collect();
        assert_eq!(fractions, [0.25, 0.5, 0.75]);
        assert_eq!(reports[1].1, "slept 1.0s of 2s");
    }

    #[tokio::test(start_paused = true)]
    async fn a_zero_second_sleep_returns_at_once_without_reports() {
        let (ctx, reporter) = context();
        let output = Sleep.execute(ctx, json!({ "seconds": 0 })).await.unwrap();
        assert_eq!(output, json!({ "slept_seconds": 0.0 }));
        assert!(reporter.reports().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn cancelling_mid_sleep_returns_a_permanent_cancelled_promptly() {
        let (ctx, _reporter) = context();
        let cancel = ctx.cancel.clone();
        let start = Instant::now();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1_300)).await;
            cancel.cancel();
        });
        let err = Sleep.execute(ctx, json!({ "seconds": 60 })).await.unwrap_err();
        assert_eq!(err.code, codes::CANCELLED);
        assert!(!err.retryable);
        assert!(start.elapsed() < Duration::from_millis(1_300 + 200), "{:?}", start.elapsed());
    }

    #[tokio::test(start_paused = true)]
    async fn a_sleep_past_the_deadline_fails_retryably_at_the_deadline() {
        let (ctx, _reporter) = context_with(RecordingReporter::default(), Duration::from_secs(3));
        let start = Instant::now();
        let err = Sleep.execute(ctx, json!({ "seconds": 10 })).await.unwrap_err();
        assert_eq!(err.code, codes::DEADLINE_EXCEEDED);
        assert!(err.retryable);
        assert_eq!(start.elapsed(), Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_lease_stops_the_sleep_at_the_next_report() {
        let reporter = RecordingReporter { lease_lost_at: Some(2), ..RecordingReporter::default() };
        let (ctx, reporter) = context_with(reporter, Duration::from_secs(3600));
        let start = Instant::now();
        let err = Sleep.execute(ctx, json!({ "seconds": 60 })).await.unwrap_err();
        assert_eq!(err.code, codes::CANCELLED);
        assert!(err.message.contains("lease was lost"), "{}", err.message);
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        assert_eq!(reporter.reports().len(), 2);
    }

    #[tokio::test]
    async fn out_of_range_or_malformed_seconds_are_invalid_input() {
        for input in [
            json!({ "seconds": -1 }),
            json!({ "seconds": 86_401 }),
            json!({ "seconds": "5" }),
            json!({}),
            json!({ "seconds": 1, "extra": true }),
        ] {
            let err = Sleep.execute(context().0, input.clone()).await.unwrap_err();
            assert_eq!(err.code, codes::INVALID_INPUT, "{input}");
            assert!(!err.retryable);
            assert!(err.message.contains("seconds") || err.message.contains("extra"), "{}", err.message);
        }
    }
}
