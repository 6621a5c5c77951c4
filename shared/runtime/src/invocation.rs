//! An invocation's time: how long a Lambda invocation (or a local batch) may run, from the
//! runtime's deadline when it is plausible, else from the function's timeout.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::settings::Settings;

/// The runtime API's header that carries an invocation's deadline (milliseconds since the epoch).
pub const DEADLINE_HEADER: &str = "Lambda-Runtime-Deadline-Ms";
/// How far beyond the function's timeout an invocation's deadline may lie, when the invocation
/// starts, and still be believed (the runtime stamps it a moment before the handler sees it).
pub const DEADLINE_SLACK: Duration = Duration::from_secs(2);
/// The longest timeout Lambda allows a function (15 minutes).
pub const LAMBDA_MAX_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// The longest one invocation of a function may last, and where that number comes from (the
/// warning about an unusable deadline names it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FunctionTimeout {
    pub duration: Duration,
    pub source: &'static str,
}

impl FunctionTimeout {
    /// The executor's timeout: `RARA_FUNCTION_TIMEOUT_SECONDS`.
    pub fn executor(settings: &Settings) -> Self {
        FunctionTimeout { duration: settings.core.function_timeout, source: "RARA_FUNCTION_TIMEOUT_SECONDS" }
    }

    /// The scheduler's own timeout is configured nowhere (`RARA_FUNCTION_TIMEOUT_SECONDS` is the
    /// executor's, and the template gives the scheduler 60 s when the executor has 30 s), so its
    /// bound is Lambda's longest timeout; its budget (`RARA_SCHEDULER_BUDGET_SECONDS`) is what
    /// ends an invocation.
    pub fn scheduler() -> Self {
        FunctionTimeout { duration: LAMBDA_MAX_TIMEOUT, source: "Lambda's longest function timeout" }
    }
}

/// An invocation's time as its handler sees it when the invocation starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvocationTime {
    /// The runtime's deadline is plausible: the time left until it.
    Deadline(Duration),
    /// The runtime's deadline (`deadline_ms`) is already past, or further from now than the
    /// function's timeout plus [`DEADLINE_SLACK`] (`cargo lambda watch` 1.9 sends `600000`, an
    /// instant in 1970): it is unknown, and the invocation may use the function's timeout.
    Unknown { deadline_ms: u64, fallback: Duration },
}

impl InvocationTime {
    /// Judges the runtime's `deadline_ms` at `now_ms` (both milliseconds since the epoch).
    pub fn judge(deadline_ms: u64, now_ms: u64, timeout: Duration) -> Self {
        let left = Duration::from_millis(deadline_ms.saturating_sub(now_ms));
        if deadline_ms <= now_ms || left > timeout + DEADLINE_SLACK {
            InvocationTime::Unknown { deadline_ms, fallback: timeout }
        } else {
            InvocationTime::Deadline(left)
        }
    }

    /// The time the invocation may use from now.
    pub fn remaining(self) -> Duration {
        match self {
            InvocationTime::Deadline(left) => left,
            InvocationTime::Unknown { fallback, .. } => fallback,
        }
    }
}

/// The time an invocation starting now may use (the executions' and the scheduler's deadlines
/// are cut from it): until the runtime's deadline (`deadline_ms`, the [`DEADLINE_HEADER`])
/// when that is plausible, else `timeout` from now ([`InvocationTime::judge`]), which the
/// first such invocation of the process logs as a warning.
pub fn remaining(deadline_ms: u64, timeout: FunctionTimeout) -> Duration {
    static WARNED: AtomicBool = AtomicBool::new(false);
    remaining_at(deadline_ms, now_ms(), timeout, &WARNED)
}

/// [`remaining`] at `now_ms`, warning only when `warned` is still false.
pub fn remaining_at(deadline_ms: u64, now_ms: u64, timeout: FunctionTimeout, warned: &AtomicBool) -> Duration {
    let time = InvocationTime::judge(deadline_ms, now_ms, timeout.duration);
    if let InvocationTime::Unknown { deadline_ms, fallback } = time
        && !warned.swap(true, Ordering::Relaxed)
    {
        let when = chrono::DateTime::from_timestamp_millis(i64::try_from(deadline_ms).unwrap_or(i64::MAX))
            .map_or_else(|| "out of range".to_owned(), |t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
        let reason = if deadline_ms <= now_ms {
            "already past".to_owned()
        } else {
            format!("more than {} from now", rara_domain::human::duration(timeout.duration + DEADLINE_SLACK))
        };
        tracing::warn!(
            header = DEADLINE_HEADER,
            value = deadline_ms,
            used_seconds = fallback.as_secs_f64(),
            "the invocation deadline is unusable: {DEADLINE_HEADER}: {deadline_ms} ({when}) is {reason}; using {} \
             from now ({}) instead (`cargo lambda watch` sends such a deadline); logged once per process",
            rara_domain::human::duration(fallback),
            timeout.source,
        );
    }
    time.remaining()
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    const NOW_MS: u64 = 1_796_000_000_000; // 2026-11-29
    const MINUTE: FunctionTimeout = FunctionTimeout { duration: Duration::from_secs(60), source: "RARA_TEST_TIMEOUT" };

    fn judge(deadline_ms: u64) -> InvocationTime {
        InvocationTime::judge(deadline_ms, NOW_MS, MINUTE.duration)
    }

    #[test]
    fn a_plausible_deadline_is_used_as_it_is() {
        assert_eq!(judge(NOW_MS + 59_990), InvocationTime::Deadline(Duration::from_millis(59_990)));
        assert_eq!(judge(NOW_MS + 1), InvocationTime::Deadline(Duration::from_millis(1)));
        // A runtime that stamped the deadline a moment before the handler saw it: within the slack.
        assert_eq!(judge(NOW_MS + 61_500).remaining(), Duration::from_millis(61_500));
    }

    #[test]
    fn a_deadline_already_past_is_unknown_and_the_function_timeout_is_used() {
        for deadline_ms in [NOW_MS - 1, NOW_MS, 0] {
            assert_eq!(
                judge(deadline_ms),
                InvocationTime::Unknown { deadline_ms, fallback: MINUTE.duration },
                "{deadline_ms}"
            );
        }
    }

    #[test]
    fn cargo_lambda_watch_deadline_in_1970_gives_the_function_timeout() {
        // `cargo lambda watch` 1.9.2 sends `Lambda-Runtime-Deadline-Ms: 600000`.
        assert_eq!(judge(600_000).remaining(), Duration::from_secs(60));
    }

    #[test]
    fn a_deadline_implausibly_far_is_unknown_and_the_function_timeout_is_used() {
        let far = NOW_MS + 60_000 + DEADLINE_SLACK.as_millis() as u64 + 1;
        assert_eq!(judge(far), InvocationTime::Unknown { deadline_ms: far, fallback: MINUTE.duration });
        assert_eq!(judge(u64::MAX).remaining(), Duration::from_secs(60));
    }

    #[test]
    fn the_scheduler_believes_any_deadline_lambda_can_give() {
        let scheduler = FunctionTimeout::scheduler().duration;
        let fifteen_minutes = NOW_MS + 900_000;
        assert_eq!(InvocationTime::judge(fifteen_minutes, NOW_MS, scheduler).remaining(), Duration::from_secs(900));
        assert_eq!(InvocationTime::judge(600_000, NOW_MS, scheduler).remaining(), Duration::from_secs(900));
    }

    /// The log lines written while `f` runs.
    fn logged(f: impl FnOnce()) -> Vec<String> {
        #[derive(Clone, Default)]
        struct Lines(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Lines {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
        tracing::subscriber::with_default(subscriber, f);
        let bytes = lines.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        String::from_utf8_lossy(&bytes).lines().map(str::to_owned).collect()
    }

    #[test]
    fn an_unusable_deadline_is_logged_once_with_the_header_its_value_and_what_was_used() {
        let warned = AtomicBool::new(false);
        let lines = logged(|| {
            for deadline_ms in [600_000, NOW_MS + 30_000, 600_000, u64::MAX] {
                remaining_at(deadline_ms, NOW_MS, MINUTE, &warned);
            }
        });
        assert_eq!(lines.len(), 1, "{lines:#?}");
        let line = &lines[0];
        for needle in [
            "WARN",
            "Lambda-Runtime-Deadline-Ms: 600000 (1970-01-01T00:10:00.000Z) is already past",
            "using 60 s from now (RARA_TEST_TIMEOUT) instead",
        ] {
            assert!(line.contains(needle), "{needle:?} not in {line}");
        }

        let warned = AtomicBool::new(false);
        let lines = logged(|| {
            remaining_at(NOW_MS + 3_600_000, NOW_MS, MINUTE, &warned);
        });
        assert!(lines[0].contains("is more than 62 s from now"), "{lines:#?}");
    }

    #[test]
    fn a_plausible_deadline_is_not_logged() {
        let warned = AtomicBool::new(false);
        assert!(logged(|| assert_eq!(remaining_at(NOW_MS + 10, NOW_MS, MINUTE, &warned).as_millis(), 10)).is_empty());
        assert!(!warned.load(Ordering::Relaxed));
    }
}
