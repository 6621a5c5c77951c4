//! Transient errors of an outside call (SQS, Postgres, a remote executor), logged once per
//! burst: the first failure after a success is a warning that names the peer (an endpoint,
//! a queue URL, a database host: never credentials); the ones after it are counted, not
//! logged; the first success after them says, in one line, that the peer recovered, how
//! many errors were suppressed and for how long. A silent peer retried every second thus
//! costs two log lines, not one per attempt.

use std::fmt::Display;
use std::time::Duration;

use tokio::time::Instant;

/// The failures of one kind of call to one peer since its last success.
#[derive(Debug)]
pub struct Burst {
    call: &'static str,
    peer: String,
    /// When the burst began and the failures it has had (`None`: the peer answers).
    open: Option<(Instant, u64)>,
}

/// A burst that ended: the peer answered again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recovered {
    /// Failures in the burst, the logged first one included.
    pub errors: u64,
    /// From the first failure to the success.
    pub lasted: Duration,
}

impl Burst {
    /// `call` says what failed ("receive", "scheduler pass"); `peer` where it went.
    pub fn new(call: &'static str, peer: impl Into<String>) -> Self {
        Burst { call, peer: peer.into(), open: None }
    }

    /// A failed call. The first of a burst is logged (warn); the others are only counted.
    /// Returns whether this one was logged.
    pub fn failed(&mut self, error: &dyn Display) -> bool {
        match &mut self.open {
            Some((_, errors)) => {
                *errors += 1;
                false
            }
            None => {
                self.open = Some((Instant::now(), 1));
                tracing::warn!(
                    call = self.call, peer = %self.peer, error = %error,
                    "{} failed; trying again (further errors are counted until it recovers)", self.call
                );
                true
            }
        }
    }

    /// A call that succeeded: ends the burst, if one was open, with one info line.
    pub fn succeeded(&mut self) -> Option<Recovered> {
        let (since, errors) = self.open.take()?;
        let recovered = Recovered { errors, lasted: since.elapsed() };
        tracing::info!(
            call = self.call, peer = %self.peer, errors, suppressed = errors - 1,
            lasted_ms = recovered.lasted.as_millis() as u64, "{} recovered", self.call
        );
        Some(recovered)
    }

    /// Failures in the open burst (0: none open).
    pub fn errors(&self) -> u64 {
        self.open.map_or(0, |(_, errors)| errors)
    }
}

/// Names a Postgres pool's server for logs: `postgres://host:port/database`, without the
/// user or the password.
pub fn postgres_peer(pool: &sqlx::PgPool) -> String {
    let options = pool.connect_options();
    format!("postgres://{}:{}/{}", options.get_host(), options.get_port(), options.get_database().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_burst_is_logged_once_counted_throughout_and_closed_by_a_success() {
        let mut burst = Burst::new("receive", "http://127.0.0.1:4566/000000000000/q");
        assert_eq!(burst.succeeded(), None, "no burst, nothing to recover from");
        assert!(burst.failed(&"timed out"), "the first failure is logged");
        assert!(!burst.failed(&"timed out") && !burst.failed(&"timed out"), "the next ones are not");
        assert_eq!(burst.errors(), 3);
        let recovered = burst.succeeded().unwrap();
        assert_eq!(recovered.errors, 3);
        assert_eq!(burst.errors(), 0);
        assert!(burst.failed(&"refused"), "a new burst is logged again");
    }
}
