//! Settings of the scheduler and the executor, read once at start on top of the shared
//! [`Config`] and validated with clear messages.

use std::time::Duration;

use rara_domain::config::{Config, Error, MAX_VISIBILITY_DELAY, Vars};

use crate::timeouts::Timeouts;

/// Steps leased per scheduler round: each round's statement scans the due index from its
/// head, past the entries of the steps leased before it, so fewer, larger rounds cost less per
/// step (journal: `docs/benchmarks/journal/2026-12-05-larger-lease-rounds.md`).
pub const DEFAULT_LEASE_BATCH: u32 = 1000;
pub const DEFAULT_REAP_BATCH: u32 = 1000;
pub const DEFAULT_SCHEDULER_BUDGET_SECONDS: u64 = 50;
pub const DEFAULT_SCHEDULER_POLL_MS: u64 = 1000;
pub const DEFAULT_REAP_INTERVAL_MS: u64 = 5000;
pub use rara_domain::config::DEFAULT_DEADLINE_MARGIN_MS;
pub const DEFAULT_PROGRESS_INTERVAL_MS: u64 = 1000;
pub const DEFAULT_REATTACH_INTERVAL_SECONDS: u64 = 30;
pub const DEFAULT_RETENTION_DAYS: u64 = 30;
pub const DEFAULT_PRUNE_BATCH: u32 = 500;
/// Steps per message: an executor batch of ten messages (the event source's default) then
/// claims and records up to a hundred steps with the statements of one batch (journal:
/// `docs/benchmarks/journal/2026-12-05-several-steps-per-message.md`).
pub const DEFAULT_STEPS_PER_MESSAGE: u32 = 10;
/// Default `RARA_MAX_GATHERED_BYTES`: the most a map step's dependent gathers of its
/// children's outputs (measured in Postgres, before anything is read).
pub const DEFAULT_MAX_GATHERED_BYTES: usize = 16 * 1024 * 1024;

/// Default `RARA_INLINE_OUTPUT_BYTES`: an output (or a run's inputs) larger than this
/// (serialised) is written to the artifact store and the step (or run) keeps a reference (when
/// `RARA_ARTIFACTS_URI` is set).
pub const DEFAULT_INLINE_OUTPUT_BYTES: usize = rara_artifacts::DEFAULT_INLINE_BYTES;

/// Settings of both functions.
#[derive(Debug, Clone)]
pub struct Settings {
    pub core: Config,
    /// `RARA_QUEUE_URL`: the step queue.
    pub queue_url: String,
    /// `RARA_DLQ_URL`: where the executor puts what it cannot process, with the reason.
    pub dlq_url: Option<String>,
    /// `RARA_LEASE_BATCH_SIZE`: steps leased per scheduler round.
    pub lease_batch: u32,
    /// `RARA_STEPS_PER_MESSAGE`: at most how many of a lease round's steps one message names
    /// (1 to [`MAX_STEPS_PER_MESSAGE`](rara_queue::message::MAX_STEPS_PER_MESSAGE), default
    /// [`DEFAULT_STEPS_PER_MESSAGE`]; 1 writes only format 1, which every earlier executor
    /// reads). Above 1, an executor batch of ten messages claims and records up to that many
    /// times more steps with the same statements, and SQS carries that many times fewer
    /// messages; a message comes back whole when one of its steps must (DESIGN.md "Several
    /// steps per message").
    pub steps_per_message: usize,
    /// `RARA_REAP_BATCH_SIZE`: expired leases returned per reaper pass.
    pub reap_batch: u32,
    /// `RARA_SCHEDULER_BUDGET_SECONDS`: how long one scheduler invocation keeps polling.
    pub scheduler_budget: Duration,
    /// `RARA_SCHEDULER_POLL_MS`: the longest pause between scheduler passes; a `NOTIFY` on
    /// [`rara_store::DUE_CHANNEL`] (a submission, a released dependent) ends it at once.
    pub scheduler_poll: Duration,
    /// `RARA_SCHEDULER_LISTEN`: `true` (default) to wake on `NOTIFY`, `false` to only poll.
    pub scheduler_listen: bool,
    /// `RARA_REAP_INTERVAL_MS`: how often a running scheduler looks for expired leases (its
    /// first pass always does). Expired leases are minutes old by nature; leasing is not.
    pub reap_interval: Duration,
    /// `RARA_RETENTION_DAYS`: finished runs older than this are deleted with everything under
    /// them by the scheduler's maintenance, one slice every
    /// the scheduler's `PRUNE_INTERVAL`, beside its lease rounds.
    /// `None` (`0`): history is kept forever.
    pub retention: Option<Duration>,
    /// `RARA_PRUNE_BATCH_SIZE`: at most this many finished runs deleted per slice (one
    /// statement).
    pub prune_batch: u32,
    /// `RARA_ARCHIVE`: `true` copies pruned runs and everything under them into the
    /// `archived_*` tables (same statement) instead of only deleting them; default `false`.
    pub prune: rara_store::retention::Prune,
    /// `RARA_DEADLINE_MARGIN_MS`: kept free at the end of an invocation to record outcomes
    /// (read with the core configuration, which checks it: [`Config::deadline_margin`]).
    pub deadline_margin: Duration,
    /// `RARA_PROGRESS_INTERVAL_MS`: progress is written at most this often per step.
    pub progress_interval: Duration,
    /// `RARA_REMOTE_EXECUTORS`: comma-separated gRPC endpoints of remote executors.
    pub remote_executors: Option<String>,
    /// `RARA_REMOTE_CA_FILE`, `RARA_REMOTE_CLIENT_{CERT,KEY}_FILE`, `RARA_REMOTE_TOKEN`,
    /// `RARA_REMOTE_ATTEMPT_KEY`: how rara proves itself to remote executors and checks them.
    pub remote_security: rara_remote::Security,
    /// `RARA_REMOTE_CREDENTIALS_SECRET_ARN`: deployed, the secret whose token and attempt key
    /// replace `remote_security`'s at start (the function fetches it once; see
    /// [`rara_remote::Security::with_credentials_json`]).
    pub remote_credentials_secret: Option<String>,
    /// `RARA_SECRETS_BACKEND`: where `{"$secret": name}` references are resolved: `env`
    /// (`RARA_SECRET_<NAME>` or `RARA_SECRETS_DIR/<name>`) or `secretsmanager`.
    pub secrets_backend: SecretsBackend,
    /// `RARA_SECRETS_PREFIX`: prepended to a name to form the Secrets Manager secret id.
    pub secrets_prefix: String,
    /// Deadlines on every outside call, and the shutdown grace ([`Timeouts`]).
    pub timeouts: Timeouts,
    /// `RARA_DELIVERY_TIMEOUT_SECONDS`: how long a step's message may take to be claimed
    /// (waiting in a backlog included) before the reaper leases the step again with a new
    /// message. Default: the visibility timeout × `maxReceiveCount`, the longest a message
    /// can keep coming back before SQS redrives it to the DLQ. At least the visibility
    /// timeout. An execution's lease (`RARA_LEASE_SECONDS`) starts only at the claim.
    pub delivery_timeout: Duration,
    /// `RARA_REATTACH_INTERVAL_SECONDS`: how long a parked remote attempt runs detached before
    /// its message comes back and an executor re-attaches to record what it did (at most the
    /// 12-hour visibility limit). Lambda time is paid only while attached.
    pub reattach_interval: Duration,
    /// `RARA_ATTACH_WINDOW_SECONDS`: how long an executor stays attached to a remote attempt
    /// that can detach before it parks it, recording what came meanwhile. Unset: until the
    /// invocation's end (the outcome is recorded as soon as it comes). A short window pays
    /// Lambda time only for the window per re-attach interval; the outcome is then recorded
    /// at the re-attach after it.
    pub attach_window: Option<Duration>,
    /// `RARA_HTTP_EGRESS`, `RARA_HTTP_ALLOW_CIDRS`, `RARA_HTTP_ALLOW_HOSTS`: what `http.request`
    /// may connect to (`rara_builtins::egress`).
    pub egress: rara_builtins::egress::Policy,
    /// `RARA_MAX_OUTPUT_BYTES`, `RARA_MAX_ARTIFACTS_PER_ATTEMPT`: what a step may return
    /// ([`rara_remote::bounds`]); beyond them the attempt fails with `OUTPUT_TOO_LARGE`.
    pub returns: rara_remote::Limits,
    /// `RARA_MAX_GATHERED_BYTES`: the most a map step gathers of its children's outputs.
    pub max_gathered_bytes: usize,
    /// `RARA_ARTIFACTS_URI`: the artifact store (`s3://bucket/prefix`, `file:///dir`), checked
    /// at start; unset: none, every output stays inline.
    pub artifacts_uri: Option<String>,
    /// `RARA_INLINE_OUTPUT_BYTES`: the largest output (or run inputs) kept inline in Postgres; a
    /// larger one goes to the artifact store and the step (or run) keeps a reference.
    pub inline_output_bytes: usize,
}

/// Where secret references are resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretsBackend {
    Env,
    SecretsManager,
}

impl SecretsBackend {
    /// `RARA_SECRETS_BACKEND`: `env` (the default) or `secretsmanager`.
    fn from_var(value: Option<&str>) -> Result<Self, Error> {
        match value {
            None | Some("env") => Ok(SecretsBackend::Env),
            Some("secretsmanager") => Ok(SecretsBackend::SecretsManager),
            Some(other) => Err(Error::Invalid {
                var: "RARA_SECRETS_BACKEND",
                value: other.to_owned(),
                reason: "expected `env` or `secretsmanager`".into(),
            }),
        }
    }
}

/// `RARA_MAX_OUTPUT_BYTES`, `RARA_MAX_ARTIFACTS_PER_ATTEMPT`.
fn returns<F: Fn(&str) -> Option<String>>(vars: &Vars<'_, F>) -> Result<rara_remote::Limits, Error> {
    Ok(rara_remote::Limits {
        max_output_bytes: vars.parse(
            "RARA_MAX_OUTPUT_BYTES",
            rara_remote::bounds::DEFAULT_MAX_OUTPUT_BYTES,
            "a number of bytes",
        )?,
        max_artifacts: vars.parse(
            "RARA_MAX_ARTIFACTS_PER_ATTEMPT",
            rara_remote::bounds::DEFAULT_MAX_ARTIFACTS,
            "a whole number",
        )?,
    })
}

/// `RARA_ARTIFACTS_URI`, when set and well-formed.
fn artifacts_uri<F: Fn(&str) -> Option<String>>(vars: &Vars<'_, F>) -> Result<Option<String>, Error> {
    let Some(uri) = vars.optional("RARA_ARTIFACTS_URI") else { return Ok(None) };
    match rara_artifacts::Location::parse(&uri) {
        Ok(_) => Ok(Some(uri)),
        Err(rara_artifacts::Error::Config { reason, .. }) => {
            Err(Error::Invalid { var: "RARA_ARTIFACTS_URI", value: uri, reason })
        }
        Err(e) => Err(Error::Invalid { var: "RARA_ARTIFACTS_URI", value: uri, reason: e.to_string() }),
    }
}

impl Settings {
    pub fn from_lookup(role: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let core = Config::from_lookup(role, &lookup)?;
        let vars = Vars(&lookup);
        let settings = Settings {
            queue_url: vars.required("RARA_QUEUE_URL", "the URL of the step queue")?,
            dlq_url: vars.optional("RARA_DLQ_URL"),
            lease_batch: vars.count("RARA_LEASE_BATCH_SIZE", DEFAULT_LEASE_BATCH)?,
            steps_per_message: vars.count("RARA_STEPS_PER_MESSAGE", DEFAULT_STEPS_PER_MESSAGE)? as usize,
            reap_batch: vars.count("RARA_REAP_BATCH_SIZE", DEFAULT_REAP_BATCH)?,
            scheduler_budget: Duration::from_secs(vars.parse(
                "RARA_SCHEDULER_BUDGET_SECONDS",
                DEFAULT_SCHEDULER_BUDGET_SECONDS,
                "a number of seconds",
            )?),
            scheduler_poll: vars.millis("RARA_SCHEDULER_POLL_MS", DEFAULT_SCHEDULER_POLL_MS)?,
            scheduler_listen: vars.parse("RARA_SCHEDULER_LISTEN", true, "`true` or `false`")?,
            reap_interval: vars.millis("RARA_REAP_INTERVAL_MS", DEFAULT_REAP_INTERVAL_MS)?,
            retention: match vars.parse("RARA_RETENTION_DAYS", DEFAULT_RETENTION_DAYS, "a whole number of days")? {
                0 => None,
                days => Some(Duration::from_secs(days.saturating_mul(86_400))),
            },
            prune_batch: vars.count("RARA_PRUNE_BATCH_SIZE", DEFAULT_PRUNE_BATCH)?,
            prune: match vars.parse("RARA_ARCHIVE", false, "`true` or `false`")? {
                true => rara_store::retention::Prune::Archive,
                false => rara_store::retention::Prune::Delete,
            },
            deadline_margin: core.deadline_margin,
            progress_interval: vars.millis("RARA_PROGRESS_INTERVAL_MS", DEFAULT_PROGRESS_INTERVAL_MS)?,
            remote_executors: vars.optional("RARA_REMOTE_EXECUTORS"),
            remote_security: rara_remote::Security::from_lookup(|var| vars.optional(var)).map_err(|e| {
                // The value may be a secret: only the reason is said.
                Error::Invalid { var: e.var(), value: "(not shown)".into(), reason: e.to_string() }
            })?,
            remote_credentials_secret: vars.optional(rara_remote::security::CREDENTIALS_SECRET_VAR),
            secrets_backend: SecretsBackend::from_var(vars.optional("RARA_SECRETS_BACKEND").as_deref())?,
            secrets_prefix: vars.optional("RARA_SECRETS_PREFIX").unwrap_or_default(),
            timeouts: Timeouts::from_vars(&vars)?,
            delivery_timeout: Duration::from_secs(vars.parse(
                "RARA_DELIVERY_TIMEOUT_SECONDS",
                core.visibility_timeout.as_secs() * u64::from(core.max_receive_count),
                "a whole number of seconds",
            )?),
            attach_window: match vars.optional("RARA_ATTACH_WINDOW_SECONDS") {
                None => None,
                Some(_) => Some(Duration::from_secs(vars.parse(
                    "RARA_ATTACH_WINDOW_SECONDS",
                    0,
                    "a whole number of seconds",
                )?)),
            },
            reattach_interval: Duration::from_secs(vars.parse(
                "RARA_REATTACH_INTERVAL_SECONDS",
                DEFAULT_REATTACH_INTERVAL_SECONDS,
                "a whole number of seconds",
            )?),
            egress: rara_builtins::egress::Policy::from_lookup(|var| vars.optional(var))
                .map_err(|e| Error::Invalid { var: e.var, value: e.entry, reason: e.reason })?,
            returns: returns(&vars)?,
            max_gathered_bytes: vars.parse(
                "RARA_MAX_GATHERED_BYTES",
                DEFAULT_MAX_GATHERED_BYTES,
                "a number of bytes",
            )?,
            artifacts_uri: artifacts_uri(&vars)?,
            inline_output_bytes: vars.parse(
                "RARA_INLINE_OUTPUT_BYTES",
                DEFAULT_INLINE_OUTPUT_BYTES,
                "a number of bytes",
            )?,
            core,
        };
        settings.validated()
    }

    /// The settings when their values agree with each other and with SQS's limits.
    fn validated(self) -> Result<Self, Error> {
        let settings = self;
        if settings.lease_batch == 0 {
            return Err(Error::Invalid {
                var: "RARA_LEASE_BATCH_SIZE",
                value: "0".into(),
                reason: "must be at least 1".into(),
            });
        }
        if !(1..=rara_queue::message::MAX_STEPS_PER_MESSAGE).contains(&settings.steps_per_message) {
            return Err(Error::Invalid {
                var: "RARA_STEPS_PER_MESSAGE",
                value: settings.steps_per_message.to_string(),
                reason: format!("must be from 1 to {}", rara_queue::message::MAX_STEPS_PER_MESSAGE),
            });
        }
        if settings.prune_batch == 0 {
            return Err(Error::Invalid {
                var: "RARA_PRUNE_BATCH_SIZE",
                value: "0".into(),
                reason: "must be at least 1 (`RARA_RETENTION_DAYS=0` keeps history forever)".into(),
            });
        }
        if settings.delivery_timeout < settings.core.visibility_timeout {
            return Err(Error::Misaligned(format!(
                "RARA_DELIVERY_TIMEOUT_SECONDS ({}) must be at least RARA_VISIBILITY_TIMEOUT_SECONDS ({}): a \
                 message that was received and came back must still find its step leased",
                rara_domain::human::duration(settings.delivery_timeout),
                rara_domain::human::duration(settings.core.visibility_timeout)
            )));
        }
        if settings.reattach_interval.is_zero() || settings.reattach_interval > MAX_VISIBILITY_DELAY {
            return Err(Error::Invalid {
                var: "RARA_REATTACH_INTERVAL_SECONDS",
                value: settings.reattach_interval.as_secs().to_string(),
                reason: "must be from 1 second to 12 hours (the longest a message can stay hidden)".into(),
            });
        }
        Ok(settings)
    }

    /// The executor needs a DLQ to put poison messages on with their reason.
    pub fn require_dlq(&self) -> Result<&str, Error> {
        self.dlq_url.as_deref().ok_or_else(|| Error::Invalid {
            var: "RARA_DLQ_URL",
            value: String::new(),
            reason: "must be set to the URL of the dead-letter queue".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_url_is_required_and_named() {
        let err = Settings::from_lookup("t", |_| None).unwrap_err().to_string();
        assert!(err.contains("RARA_QUEUE_URL"), "{err}");
    }

    #[test]
    fn empty_values_count_as_unset() {
        let settings = Settings::from_lookup("t", |k| match k {
            "RARA_QUEUE_URL" => Some("http://q".into()),
            "RARA_DLQ_URL" | "RARA_REMOTE_EXECUTORS" | "RARA_LEASE_BATCH_SIZE" | "RARA_SCHEDULER_POLL_MS" => {
                Some(" ".into())
            }
            _ => Some(String::new()),
        })
        .unwrap();
        assert_eq!((settings.dlq_url, settings.remote_executors), (None, None));
        assert_eq!(settings.lease_batch, DEFAULT_LEASE_BATCH);
        assert_eq!(settings.scheduler_poll, Duration::from_millis(DEFAULT_SCHEDULER_POLL_MS));
        let err = Settings::from_lookup("t", |_| Some(String::new())).unwrap_err().to_string();
        assert!(err.contains("RARA_QUEUE_URL"), "{err}");
    }

    #[test]
    fn retention_defaults_to_30_days_and_0_keeps_history_forever() {
        let with = |days: &'static str| {
            Settings::from_lookup("t", move |k| match k {
                "RARA_QUEUE_URL" => Some("http://q".into()),
                "RARA_RETENTION_DAYS" => Some(days.into()),
                _ => None,
            })
        };
        let default = with("").unwrap();
        assert_eq!(default.retention, Some(Duration::from_secs(30 * 86_400)));
        assert_eq!(default.prune_batch, DEFAULT_PRUNE_BATCH);
        assert_eq!(with("0").unwrap().retention, None);
        assert_eq!(with("7").unwrap().retention, Some(Duration::from_secs(7 * 86_400)));
        let err = with("7d").unwrap_err().to_string();
        assert!(err.contains("RARA_RETENTION_DAYS"), "{err}");
        let err = Settings::from_lookup("t", |k| match k {
            "RARA_QUEUE_URL" => Some("http://q".into()),
            "RARA_PRUNE_BATCH_SIZE" => Some("0".into()),
            _ => None,
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("RARA_PRUNE_BATCH_SIZE"), "{err}");
        assert_eq!(default.prune, rara_store::retention::Prune::Delete, "archiving is asked for");
        let archiving = Settings::from_lookup("t", |k| match k {
            "RARA_QUEUE_URL" => Some("http://q".into()),
            "RARA_ARCHIVE" => Some("true".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(archiving.prune, rara_store::retention::Prune::Archive);
    }

    #[test]
    fn misaligned_core_settings_are_refused_here_too() {
        let err = Settings::from_lookup("t", |k| match k {
            "RARA_QUEUE_URL" => Some("http://q".into()),
            "RARA_VISIBILITY_TIMEOUT_SECONDS" => Some("10".into()),
            _ => None,
        })
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("misaligned configuration"), "{err}");
    }

    #[test]
    fn a_bad_egress_cidr_names_the_variable_and_the_entry() {
        let err = Settings::from_lookup("test", |k| match k {
            "RARA_QUEUE_URL" => Some("http://q".into()),
            "RARA_HTTP_ALLOW_CIDRS" => Some("127.0.0.1/32, 10.0.0.0/99".into()),
            _ => None,
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("RARA_HTTP_ALLOW_CIDRS") && err.contains("\"10.0.0.0/99\""), "{err}");
    }
}
