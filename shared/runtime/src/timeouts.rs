//! Deadlines on every outside call (SQS, Secrets Manager, Postgres, remote executors) and the
//! grace a stopping runner gives what it holds. A silent peer — one that accepts a
//! connection and never answers — costs at most these times, then it is a transient error
//! like any other: logged, retried, never a wedged runner or a lost step.
//!
//! Every value comes from `RARA_*` variables with the defaults below (README, "Timeouts").
//! The AWS SDK configuration built from them is `rara-platform`'s (`rara_platform::aws`).

use std::time::Duration;

use rara_domain::config::{Error, Vars};

pub const DEFAULT_SQS_CONNECT_TIMEOUT_MS: u64 = 3_000;
pub const DEFAULT_SQS_ATTEMPT_TIMEOUT_MS: u64 = 5_000;
pub const DEFAULT_SQS_OPERATION_TIMEOUT_MS: u64 = 12_000;
pub const DEFAULT_SQS_MAX_ATTEMPTS: u32 = 3;
pub const DEFAULT_DB_CONNECT_TIMEOUT_MS: u64 = 5_000;
pub const DEFAULT_DB_STATEMENT_TIMEOUT_MS: u64 = 30_000;
pub const DEFAULT_DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: u64 = 10_000;
pub const DEFAULT_SHUTDOWN_GRACE_SECONDS: u64 = 10;
pub const DEFAULT_GRPC_CONNECT_TIMEOUT_MS: u64 = 3_000;
pub const DEFAULT_GRPC_KEEPALIVE_INTERVAL_MS: u64 = 10_000;
pub const DEFAULT_GRPC_KEEPALIVE_TIMEOUT_MS: u64 = 5_000;
pub const DEFAULT_GRPC_HEARTBEAT_INTERVAL_MS: u64 = 5_000;
/// What a Postgres call may take beyond its connection and statement deadlines before
/// rara gives up on it client-side ([`Timeouts::db_call`]).
pub const DB_CALL_SLACK: Duration = Duration::from_secs(1);

/// The deadlines of one function or runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// `RARA_SQS_CONNECT_TIMEOUT_MS`: TCP (and TLS) connect to SQS / Secrets Manager.
    pub aws_connect: Duration,
    /// `RARA_SQS_ATTEMPT_TIMEOUT_MS`: one HTTP attempt (a receive adds its long-poll wait).
    pub aws_attempt: Duration,
    /// `RARA_SQS_OPERATION_TIMEOUT_MS`: one operation, every retry included (a receive
    /// adds its long-poll wait).
    pub aws_operation: Duration,
    /// `RARA_SQS_MAX_ATTEMPTS`: attempts per operation in the SDK's standard retry mode
    /// (exponential backoff with jitter; throttling and transient errors are retried).
    pub aws_max_attempts: u32,
    /// `RARA_DB_CONNECT_TIMEOUT_MS`: getting a Postgres connection from the pool, a new
    /// connection's handshake included.
    pub db_connect: Duration,
    /// `RARA_DB_STATEMENT_TIMEOUT_MS`: `statement_timeout` of rara's own sessions.
    pub db_statement: Duration,
    /// `RARA_DB_IDLE_IN_TRANSACTION_TIMEOUT_MS`: `idle_in_transaction_session_timeout` of
    /// rara's own sessions.
    pub db_idle_in_transaction: Duration,
    /// `RARA_GRPC_CONNECT_TIMEOUT_MS`, `RARA_GRPC_KEEPALIVE_INTERVAL_MS`,
    /// `RARA_GRPC_KEEPALIVE_TIMEOUT_MS`: the connections to remote executors (a ping
    /// unanswered for the timeout closes the connection: its streams end as a retryable
    /// `EXECUTOR_UNAVAILABLE`). `RARA_GRPC_HEARTBEAT_INTERVAL_MS` (0: off): the heartbeats
    /// asked of executors; a stream silent for 3 intervals ends the same way.
    pub grpc: rara_remote::Transport,
    /// `RARA_SHUTDOWN_GRACE_SECONDS`: after SIGTERM / Ctrl-C, how long held work may go on
    /// before the runner releases what it still holds and exits.
    pub shutdown_grace: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            aws_connect: Duration::from_millis(DEFAULT_SQS_CONNECT_TIMEOUT_MS),
            aws_attempt: Duration::from_millis(DEFAULT_SQS_ATTEMPT_TIMEOUT_MS),
            aws_operation: Duration::from_millis(DEFAULT_SQS_OPERATION_TIMEOUT_MS),
            aws_max_attempts: DEFAULT_SQS_MAX_ATTEMPTS,
            db_connect: Duration::from_millis(DEFAULT_DB_CONNECT_TIMEOUT_MS),
            db_statement: Duration::from_millis(DEFAULT_DB_STATEMENT_TIMEOUT_MS),
            db_idle_in_transaction: Duration::from_millis(DEFAULT_DB_IDLE_IN_TRANSACTION_TIMEOUT_MS),
            shutdown_grace: Duration::from_secs(DEFAULT_SHUTDOWN_GRACE_SECONDS),
            grpc: rara_remote::Transport {
                connect_timeout: Duration::from_millis(DEFAULT_GRPC_CONNECT_TIMEOUT_MS),
                keepalive_interval: Duration::from_millis(DEFAULT_GRPC_KEEPALIVE_INTERVAL_MS),
                keepalive_timeout: Duration::from_millis(DEFAULT_GRPC_KEEPALIVE_TIMEOUT_MS),
                heartbeat_interval: Duration::from_millis(DEFAULT_GRPC_HEARTBEAT_INTERVAL_MS),
            },
        }
    }
}

impl Timeouts {
    pub fn from_vars<F: Fn(&str) -> Option<String>>(vars: &Vars<'_, F>) -> Result<Self, Error> {
        let timeouts = Timeouts {
            aws_connect: vars.millis("RARA_SQS_CONNECT_TIMEOUT_MS", DEFAULT_SQS_CONNECT_TIMEOUT_MS)?,
            aws_attempt: vars.millis("RARA_SQS_ATTEMPT_TIMEOUT_MS", DEFAULT_SQS_ATTEMPT_TIMEOUT_MS)?,
            aws_operation: vars.millis("RARA_SQS_OPERATION_TIMEOUT_MS", DEFAULT_SQS_OPERATION_TIMEOUT_MS)?,
            aws_max_attempts: vars.count("RARA_SQS_MAX_ATTEMPTS", DEFAULT_SQS_MAX_ATTEMPTS)?,
            db_connect: vars.millis("RARA_DB_CONNECT_TIMEOUT_MS", DEFAULT_DB_CONNECT_TIMEOUT_MS)?,
            db_statement: vars.millis("RARA_DB_STATEMENT_TIMEOUT_MS", DEFAULT_DB_STATEMENT_TIMEOUT_MS)?,
            db_idle_in_transaction: vars
                .millis("RARA_DB_IDLE_IN_TRANSACTION_TIMEOUT_MS", DEFAULT_DB_IDLE_IN_TRANSACTION_TIMEOUT_MS)?,
            shutdown_grace: Duration::from_secs(vars.parse(
                "RARA_SHUTDOWN_GRACE_SECONDS",
                DEFAULT_SHUTDOWN_GRACE_SECONDS,
                "a whole number of seconds",
            )?),
            grpc: rara_remote::Transport {
                connect_timeout: vars.millis("RARA_GRPC_CONNECT_TIMEOUT_MS", DEFAULT_GRPC_CONNECT_TIMEOUT_MS)?,
                keepalive_interval: vars
                    .millis("RARA_GRPC_KEEPALIVE_INTERVAL_MS", DEFAULT_GRPC_KEEPALIVE_INTERVAL_MS)?,
                keepalive_timeout: vars.millis("RARA_GRPC_KEEPALIVE_TIMEOUT_MS", DEFAULT_GRPC_KEEPALIVE_TIMEOUT_MS)?,
                heartbeat_interval: vars
                    .millis("RARA_GRPC_HEARTBEAT_INTERVAL_MS", DEFAULT_GRPC_HEARTBEAT_INTERVAL_MS)?,
            },
        };
        let positive = [
            ("RARA_SQS_CONNECT_TIMEOUT_MS", timeouts.aws_connect),
            ("RARA_SQS_ATTEMPT_TIMEOUT_MS", timeouts.aws_attempt),
            ("RARA_SQS_OPERATION_TIMEOUT_MS", timeouts.aws_operation),
            ("RARA_DB_CONNECT_TIMEOUT_MS", timeouts.db_connect),
            ("RARA_DB_STATEMENT_TIMEOUT_MS", timeouts.db_statement),
            ("RARA_DB_IDLE_IN_TRANSACTION_TIMEOUT_MS", timeouts.db_idle_in_transaction),
            ("RARA_GRPC_CONNECT_TIMEOUT_MS", timeouts.grpc.connect_timeout),
            ("RARA_GRPC_KEEPALIVE_INTERVAL_MS", timeouts.grpc.keepalive_interval),
            ("RARA_GRPC_KEEPALIVE_TIMEOUT_MS", timeouts.grpc.keepalive_timeout),
        ];
        if let Some((var, _)) = positive.iter().find(|(_, d)| d.is_zero()) {
            return Err(Error::Invalid { var, value: "0".into(), reason: "must be at least 1 ms".into() });
        }
        if timeouts.aws_max_attempts == 0 {
            return Err(Error::Invalid {
                var: "RARA_SQS_MAX_ATTEMPTS",
                value: "0".into(),
                reason: "must be at least 1".into(),
            });
        }
        if timeouts.aws_operation < timeouts.aws_attempt {
            return Err(Error::Invalid {
                var: "RARA_SQS_OPERATION_TIMEOUT_MS",
                value: timeouts.aws_operation.as_millis().to_string(),
                reason: format!(
                    "must be at least RARA_SQS_ATTEMPT_TIMEOUT_MS ({} ms): an operation includes its attempts",
                    timeouts.aws_attempt.as_millis()
                ),
            });
        }
        Ok(timeouts)
    }

    /// The longest rara waits for one Postgres call: a connection (`db_connect`), the
    /// statement (`db_statement`, which Postgres enforces itself) and [`DB_CALL_SLACK`].
    /// Only a silent peer outlasts it: `statement_timeout` cannot end a call whose bytes
    /// never reach the server, so the runners bound their Postgres calls with this
    /// ([`db_call`]) and go on when the peer answers again.
    pub fn db_call(&self) -> Duration {
        self.db_connect + self.db_statement + DB_CALL_SLACK
    }
}

/// Runs one Postgres call for at most `bound` ([`Timeouts::db_call`]). Past it the call is
/// dropped (and its connection with it) and it fails as a transient I/O error, retried
/// like a broken connection.
pub async fn db_call<T>(
    bound: Duration,
    call: impl Future<Output = Result<T, rara_store::Error>>,
) -> Result<T, rara_store::Error> {
    tokio::time::timeout(bound, call).await.unwrap_or_else(|_| {
        Err(rara_store::Error::Database(sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("Postgres did not answer within {} ms", bound.as_millis()),
        ))))
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn from(pairs: &[(&str, &str)]) -> Result<Timeouts, Error> {
        let lookup = |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned());
        Timeouts::from_vars(&Vars(&lookup))
    }

    #[test]
    fn defaults_apply_and_each_value_is_configurable() {
        assert_eq!(from(&[]).unwrap(), Timeouts::default());
        let t = from(&[("RARA_SQS_ATTEMPT_TIMEOUT_MS", "700"), ("RARA_SHUTDOWN_GRACE_SECONDS", "0")]).unwrap();
        assert_eq!((t.aws_attempt, t.shutdown_grace), (Duration::from_millis(700), Duration::ZERO));
        assert_eq!(Timeouts::default().grpc.idle_timeout(), Some(Duration::from_secs(15)), "3 heartbeats");
        let off = from(&[("RARA_GRPC_HEARTBEAT_INTERVAL_MS", "0")]).unwrap();
        assert_eq!(off.grpc.idle_timeout(), None, "0 turns heartbeats and the idle timeout off");
    }

    #[test]
    fn zero_timeouts_and_an_operation_shorter_than_its_attempt_are_refused() {
        let err = from(&[("RARA_DB_STATEMENT_TIMEOUT_MS", "0")]).unwrap_err().to_string();
        assert!(err.contains("RARA_DB_STATEMENT_TIMEOUT_MS"), "{err}");
        let err = from(&[("RARA_SQS_OPERATION_TIMEOUT_MS", "1000")]).unwrap_err().to_string();
        assert!(err.contains("RARA_SQS_ATTEMPT_TIMEOUT_MS"), "{err}");
        assert!(from(&[("RARA_SQS_MAX_ATTEMPTS", "0")]).is_err());
    }

    #[tokio::test]
    async fn a_postgres_call_past_its_bound_is_a_transient_error() {
        let bound = Duration::from_millis(30);
        let silent = db_call(bound, std::future::pending::<Result<(), rara_store::Error>>()).await.unwrap_err();
        assert!(silent.is_transient(), "{silent}");
        assert!(silent.to_string().contains("did not answer within 30 ms"), "{silent}");
        assert_eq!(db_call(bound, async { Ok::<_, rara_store::Error>(7) }).await.unwrap(), 7);
    }
}
