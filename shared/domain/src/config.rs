//! The typed configuration, read once at start from `RARA_*` variables (and `DATABASE_URL`)
//! and validated with the alignment rules of DESIGN.md before anything runs.
//!
//! Nothing here reads the process environment itself: callers pass a lookup
//! (`|key| std::env::var(key).ok()` in binaries, a map in tests).

use std::time::Duration;

use crate::retry::RetryPolicy;

/// The longest delay SQS visibility can carry (12 hours). Longer retries go through Postgres.
pub const MAX_VISIBILITY_DELAY: Duration = Duration::from_secs(12 * 60 * 60);
/// `maxReceiveCount` must exceed the largest `max_attempts` by at least this many receives,
/// for "come back later" returns and throttled receives.
pub const RECEIVE_COUNT_MARGIN: u32 = 3;
/// The heartbeat interval may be at most this fraction (1/N) of the lease and the visibility timeout.
pub const HEARTBEAT_DIVISOR: u32 = 3;

pub const DEFAULT_LEASE_SECONDS: u64 = 60;
pub const DEFAULT_HEARTBEAT_SECONDS: u64 = 15;
pub const DEFAULT_VISIBILITY_TIMEOUT_SECONDS: u64 = 360;
pub const DEFAULT_FUNCTION_TIMEOUT_SECONDS: u64 = 60;
pub const DEFAULT_MAX_RECEIVE_COUNT: u32 = 10;
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
pub const DEFAULT_MAX_ATTEMPTS_LIMIT: u32 = 5;
pub const DEFAULT_DEADLINE_MARGIN_MS: u64 = 2000;
pub const DEFAULT_RETRY_INITIAL_DELAY_SECONDS: f64 = 1.0;
pub const DEFAULT_RETRY_MAX_DELAY_SECONDS: f64 = 300.0;
pub const DEFAULT_RETRY_MULTIPLIER: f64 = 2.0;
pub const DEFAULT_MAX_INPUT_BYTES: usize = 256 * 1024;
pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/rara";

/// A configuration that cannot be used, with the variable at fault and why.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{var}={value:?} is not valid: {reason}")]
    Invalid { var: &'static str, value: String, reason: String },
    #[error("misaligned configuration: {0}")]
    Misaligned(String),
}

/// Settings shared by the scheduler, the executor and the CLI.
#[derive(Clone, PartialEq)]
pub struct Config {
    /// `DATABASE_URL`. May hold a password: never printed (see the `Debug` impl).
    pub database_url: String,
    /// `RARA_WORKER_ID`: this worker's identity (`leased_by`). Defaults to a fresh one per process.
    pub worker_id: String,
    /// `RARA_LEASE_SECONDS`: how long a lease lasts without a heartbeat.
    pub lease_duration: Duration,
    /// `RARA_HEARTBEAT_SECONDS`: how often a running step extends its lease and visibility.
    pub heartbeat_interval: Duration,
    /// `RARA_VISIBILITY_TIMEOUT_SECONDS`: the queue's visibility timeout.
    pub visibility_timeout: Duration,
    /// `RARA_FUNCTION_TIMEOUT_SECONDS`: the executor function's timeout.
    pub function_timeout: Duration,
    /// `RARA_MAX_RECEIVE_COUNT`: the redrive policy's `maxReceiveCount`.
    pub max_receive_count: u32,
    /// `RARA_MAX_ATTEMPTS_LIMIT`: the largest `max_attempts` a step may ask for.
    pub max_attempts_limit: u32,
    /// `RARA_DEFAULT_MAX_ATTEMPTS`, `RARA_RETRY_*`: the retry policy of steps that set none.
    pub default_retry: RetryPolicy,
    /// `RARA_DEADLINE_MARGIN_MS`: kept free at the end of an invocation to record outcomes.
    pub deadline_margin: Duration,
    /// `RARA_STEP_TIMEOUT_SECONDS`: the timeout of steps that set none. It must fit one
    /// invocation ([`invocation_budget`](Self::invocation_budget)), which is its default:
    /// such a step may run in-process. Longer steps say so (`timeout_seconds`) and run on a
    /// remote executor that detaches.
    pub default_step_timeout: Duration,
    /// `RARA_MAX_INPUT_BYTES`: the largest step input accepted at submission.
    pub max_input_bytes: usize,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("database_url", &"<redacted>")
            .field("worker_id", &self.worker_id)
            .field("lease_duration", &self.lease_duration)
            .field("heartbeat_interval", &self.heartbeat_interval)
            .field("visibility_timeout", &self.visibility_timeout)
            .field("function_timeout", &self.function_timeout)
            .field("max_receive_count", &self.max_receive_count)
            .field("max_attempts_limit", &self.max_attempts_limit)
            .field("default_retry", &self.default_retry)
            .field("deadline_margin", &self.deadline_margin)
            .field("default_step_timeout", &self.default_step_timeout)
            .field("max_input_bytes", &self.max_input_bytes)
            .finish()
    }
}

impl Config {
    /// Reads and validates the configuration. `role` prefixes a generated worker id.
    pub fn from_lookup(role: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let vars = Vars(&lookup);
        let function_timeout = vars.seconds("RARA_FUNCTION_TIMEOUT_SECONDS", DEFAULT_FUNCTION_TIMEOUT_SECONDS)?;
        let deadline_margin = vars.millis("RARA_DEADLINE_MARGIN_MS", DEFAULT_DEADLINE_MARGIN_MS)?;
        let budget = Duration::from_secs(function_timeout.saturating_sub(deadline_margin).as_secs().max(1));
        let config = Config {
            database_url: lookup("DATABASE_URL").unwrap_or_else(|| DEFAULT_DATABASE_URL.to_owned()),
            worker_id: vars
                .optional("RARA_WORKER_ID")
                .unwrap_or_else(|| format!("{role}-{}", uuid::Uuid::new_v4().simple())),
            lease_duration: vars.seconds("RARA_LEASE_SECONDS", DEFAULT_LEASE_SECONDS)?,
            heartbeat_interval: vars.seconds("RARA_HEARTBEAT_SECONDS", DEFAULT_HEARTBEAT_SECONDS)?,
            visibility_timeout: vars.seconds("RARA_VISIBILITY_TIMEOUT_SECONDS", DEFAULT_VISIBILITY_TIMEOUT_SECONDS)?,
            function_timeout,
            deadline_margin,
            max_receive_count: vars.count("RARA_MAX_RECEIVE_COUNT", DEFAULT_MAX_RECEIVE_COUNT)?,
            max_attempts_limit: vars.count("RARA_MAX_ATTEMPTS_LIMIT", DEFAULT_MAX_ATTEMPTS_LIMIT)?,
            default_retry: RetryPolicy {
                max_attempts: vars.count("RARA_DEFAULT_MAX_ATTEMPTS", DEFAULT_MAX_ATTEMPTS)?,
                initial_delay: vars
                    .fractional_seconds("RARA_RETRY_INITIAL_DELAY_SECONDS", DEFAULT_RETRY_INITIAL_DELAY_SECONDS)?,
                max_delay: vars.fractional_seconds("RARA_RETRY_MAX_DELAY_SECONDS", DEFAULT_RETRY_MAX_DELAY_SECONDS)?,
                multiplier: vars.number("RARA_RETRY_MULTIPLIER", DEFAULT_RETRY_MULTIPLIER)?,
                non_retryable_codes: vars
                    .optional("RARA_NON_RETRYABLE_CODES")
                    .map(|s| s.split(',').map(|c| c.trim().to_owned()).filter(|c| !c.is_empty()).collect())
                    .unwrap_or_default(),
            },
            default_step_timeout: vars.seconds("RARA_STEP_TIMEOUT_SECONDS", budget.as_secs())?,
            max_input_bytes: vars.count("RARA_MAX_INPUT_BYTES", DEFAULT_MAX_INPUT_BYTES as u32)? as usize,
        };
        config.validate()?;
        Ok(config)
    }

    /// The longest an execution can run inside one invocation: the executor function's
    /// timeout less the margin kept to record outcomes. In-process steps must fit it.
    pub fn invocation_budget(&self) -> Duration {
        self.function_timeout.saturating_sub(self.deadline_margin)
    }

    /// The alignment rules of DESIGN.md ("Alignment of SQS and leases") and plain sanity.
    pub fn validate(&self) -> Result<(), Error> {
        let secs = |d: Duration| crate::human::duration(d).to_string();
        if self.deadline_margin >= self.function_timeout {
            return Err(Error::Misaligned(format!(
                "RARA_DEADLINE_MARGIN_MS ({} ms) must be shorter than RARA_FUNCTION_TIMEOUT_SECONDS ({})",
                self.deadline_margin.as_millis(),
                secs(self.function_timeout)
            )));
        }
        if self.default_step_timeout > self.invocation_budget() {
            return Err(Error::Misaligned(format!(
                "RARA_STEP_TIMEOUT_SECONDS ({}) must fit one invocation: at most RARA_FUNCTION_TIMEOUT_SECONDS ({}) \
                 less RARA_DEADLINE_MARGIN_MS ({} ms), i.e. {}; steps that need longer set their own \
                 timeout_seconds and run on a remote executor that detaches",
                secs(self.default_step_timeout),
                secs(self.function_timeout),
                self.deadline_margin.as_millis(),
                secs(self.invocation_budget())
            )));
        }
        if self.visibility_timeout < self.function_timeout {
            return Err(Error::Misaligned(format!(
                "RARA_VISIBILITY_TIMEOUT_SECONDS ({}) must be at least RARA_FUNCTION_TIMEOUT_SECONDS ({}): \
                 Lambda refuses a queue whose visibility timeout is shorter than the function timeout \
                 (AWS advises 6 x the function timeout)",
                secs(self.visibility_timeout),
                secs(self.function_timeout)
            )));
        }
        let heartbeat_ceiling = self.lease_duration.min(self.visibility_timeout) / HEARTBEAT_DIVISOR;
        if self.heartbeat_interval > heartbeat_ceiling {
            return Err(Error::Misaligned(format!(
                "RARA_HEARTBEAT_SECONDS ({}) must be at most 1/{HEARTBEAT_DIVISOR} of the shorter of \
                 RARA_LEASE_SECONDS ({}) and RARA_VISIBILITY_TIMEOUT_SECONDS ({}), i.e. {}, so a \
                 heartbeat always lands before the lease or the message visibility ends",
                secs(self.heartbeat_interval),
                secs(self.lease_duration),
                secs(self.visibility_timeout),
                secs(heartbeat_ceiling)
            )));
        }
        let needed = self.max_attempts_limit + RECEIVE_COUNT_MARGIN;
        if self.max_receive_count < needed {
            return Err(Error::Misaligned(format!(
                "RARA_MAX_RECEIVE_COUNT ({}) must be at least RARA_MAX_ATTEMPTS_LIMIT ({}) + {RECEIVE_COUNT_MARGIN} \
                 = {needed}, or retries would push a healthy step into the dead-letter queue",
                self.max_receive_count, self.max_attempts_limit
            )));
        }
        let retry = &self.default_retry;
        if retry.max_attempts == 0 || retry.max_attempts > self.max_attempts_limit {
            return Err(Error::Invalid {
                var: "RARA_DEFAULT_MAX_ATTEMPTS",
                value: retry.max_attempts.to_string(),
                reason: format!("must be between 1 and RARA_MAX_ATTEMPTS_LIMIT ({})", self.max_attempts_limit),
            });
        }
        if retry.max_delay < retry.initial_delay {
            return Err(Error::Invalid {
                var: "RARA_RETRY_MAX_DELAY_SECONDS",
                value: secs(retry.max_delay).to_string(),
                reason: format!("must be at least RARA_RETRY_INITIAL_DELAY_SECONDS ({})", secs(retry.initial_delay)),
            });
        }
        if retry.multiplier.is_nan() || retry.multiplier < 1.0 {
            return Err(Error::Invalid {
                var: "RARA_RETRY_MULTIPLIER",
                value: retry.multiplier.to_string(),
                reason: "must be a number of at least 1".into(),
            });
        }
        Ok(())
    }
}

/// Typed reads of optional variables, each with a named default; errors name the variable.
/// A variable set to an empty (or blank) value counts as unset.
#[derive(Debug)]
pub struct Vars<'a, F: Fn(&str) -> Option<String>>(pub &'a F);

impl<F: Fn(&str) -> Option<String>> Vars<'_, F> {
    /// The trimmed value, or `None` when unset or empty.
    pub fn optional(&self, var: &str) -> Option<String> {
        (self.0)(var).map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
    }

    pub fn parse<T: std::str::FromStr>(&self, var: &'static str, default: T, what: &str) -> Result<T, Error> {
        match self.optional(var) {
            None => Ok(default),
            Some(raw) => {
                raw.parse().map_err(|_| Error::Invalid { var, value: raw, reason: format!("expected {what}") })
            }
        }
    }

    /// A variable that must be set; `what` describes the expected value.
    pub fn required(&self, var: &'static str, what: &str) -> Result<String, Error> {
        self.optional(var).ok_or_else(|| Error::Invalid {
            var,
            value: String::new(),
            reason: format!("must be set to {what}"),
        })
    }

    pub fn millis(&self, var: &'static str, default: u64) -> Result<Duration, Error> {
        Ok(Duration::from_millis(self.parse(var, default, "a whole number of milliseconds")?))
    }

    pub fn seconds(&self, var: &'static str, default: u64) -> Result<Duration, Error> {
        let value = self.parse(var, default, "a whole number of seconds greater than 0")?;
        if value == 0 {
            return Err(Error::Invalid { var, value: "0".into(), reason: "must be greater than 0".into() });
        }
        Ok(Duration::from_secs(value))
    }

    pub fn fractional_seconds(&self, var: &'static str, default: f64) -> Result<Duration, Error> {
        let value: f64 = self.number(var, default)?;
        Duration::try_from_secs_f64(value).map_err(|_| Error::Invalid {
            var,
            value: value.to_string(),
            reason: "expected a non-negative number of seconds".into(),
        })
    }

    pub fn number(&self, var: &'static str, default: f64) -> Result<f64, Error> {
        self.parse(var, default, "a number")
    }

    pub fn count(&self, var: &'static str, default: u32) -> Result<u32, Error> {
        self.parse(var, default, "a whole number")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> Result<Config, Error> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::from_lookup("test", |k| map.get(k).cloned())
    }

    #[test]
    fn defaults_are_aligned() {
        let c = config(&[]).unwrap();
        assert!(c.worker_id.starts_with("test-"));
        assert_eq!(c.lease_duration, Duration::from_secs(DEFAULT_LEASE_SECONDS));
    }

    #[test]
    fn the_default_step_timeout_fits_one_invocation_and_a_longer_one_is_refused() {
        let c = config(&[]).unwrap();
        assert_eq!(c.default_step_timeout, Duration::from_secs(58), "60 s function timeout less the 2 s margin");
        assert!(c.default_step_timeout <= c.invocation_budget());
        let c = config(&[("RARA_FUNCTION_TIMEOUT_SECONDS", "20")]).unwrap();
        assert_eq!(c.default_step_timeout, Duration::from_secs(18));
        let err = config(&[("RARA_FUNCTION_TIMEOUT_SECONDS", "20"), ("RARA_STEP_TIMEOUT_SECONDS", "300")])
            .unwrap_err()
            .to_string();
        for var in
            ["RARA_STEP_TIMEOUT_SECONDS (5 min)", "RARA_FUNCTION_TIMEOUT_SECONDS (20 s)", "RARA_DEADLINE_MARGIN_MS"]
        {
            assert!(err.contains(var), "{err}");
        }
        assert!(err.contains("i.e. 18 s"), "{err}");
    }

    #[test]
    fn visibility_shorter_than_function_timeout_is_refused() {
        let err = config(&[("RARA_VISIBILITY_TIMEOUT_SECONDS", "30"), ("RARA_FUNCTION_TIMEOUT_SECONDS", "60")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("RARA_VISIBILITY_TIMEOUT_SECONDS (30 s)"), "{err}");
    }

    #[test]
    fn heartbeat_close_to_lease_is_refused() {
        let err = config(&[("RARA_HEARTBEAT_SECONDS", "30"), ("RARA_LEASE_SECONDS", "60")]).unwrap_err().to_string();
        assert!(err.contains("RARA_HEARTBEAT_SECONDS (30 s)") && err.contains("i.e. 20 s"), "{err}");
    }

    #[test]
    fn durations_in_errors_are_rounded_for_people() {
        let err = config(&[("RARA_HEARTBEAT_SECONDS", "3"), ("RARA_LEASE_SECONDS", "8")]).unwrap_err().to_string();
        assert!(err.contains("i.e. 2.67 s,"), "{err}");
    }

    #[test]
    fn receive_count_below_attempts_plus_margin_is_refused() {
        let err = config(&[("RARA_MAX_RECEIVE_COUNT", "6"), ("RARA_MAX_ATTEMPTS_LIMIT", "5")]).unwrap_err().to_string();
        assert!(err.contains("= 8"), "{err}");
    }

    #[test]
    fn unparsable_values_name_the_variable() {
        let err = config(&[("RARA_LEASE_SECONDS", "soon")]).unwrap_err().to_string();
        assert!(err.starts_with("RARA_LEASE_SECONDS=\"soon\" is not valid"), "{err}");
    }

    #[test]
    fn empty_values_count_as_unset() {
        let c = config(&[
            ("RARA_WORKER_ID", " "),
            ("RARA_LEASE_SECONDS", ""),
            ("RARA_RETRY_MULTIPLIER", ""),
            ("RARA_NON_RETRYABLE_CODES", ""),
        ])
        .unwrap();
        assert!(c.worker_id.starts_with("test-"), "{}", c.worker_id);
        assert_eq!(c.lease_duration, Duration::from_secs(DEFAULT_LEASE_SECONDS));
        assert_eq!(c.default_retry.multiplier, DEFAULT_RETRY_MULTIPLIER);
        assert!(c.default_retry.non_retryable_codes.is_empty());
    }

    #[test]
    fn debug_output_never_shows_the_database_url() {
        let c = config(&[("DATABASE_URL", "postgres://u:hunter2@db/x")]).unwrap();
        assert!(!format!("{c:?}").contains("hunter2"));
    }
}
