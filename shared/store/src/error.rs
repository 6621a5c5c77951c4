//! The store's errors. [`Error::LeaseLost`] is the typed answer of every fenced write that
//! matched no row: the caller no longer holds the step and must stop.

use uuid::Uuid;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A fenced write matched no row: another holder, a newer fence, or the step is no
    /// longer running (finished, cancelled, reaped, taken over).
    #[error("lease lost on step {step_id} (fence {fence}): the step is no longer held by this worker")]
    LeaseLost { step_id: Uuid, fence: i64 },
    #[error("workflow run {0} not found")]
    RunNotFound(Uuid),
    #[error("step {0} not found")]
    StepNotFound(Uuid),
    /// `rara retry` of a map's child: the map step is what comes back, with its children
    /// that did not succeed.
    #[error(
        "step {step_id} is a child of the map step {map:?}: retry {map:?}, which runs again the children that did not succeed"
    )]
    MapChild { step_id: Uuid, map: String },
    /// The idempotency key names a run submitted with other inputs: nothing was submitted.
    /// (The inputs are not named: they may be sensitive.)
    #[error(
        "idempotency key {key:?} names run {run_id}, submitted with different inputs; nothing was submitted \
         (give the same inputs to get that run, or use another key)"
    )]
    IdempotencyConflict { key: String, run_id: Uuid },
    /// Submit: a step references a secret no grant permits for its workflow and operation
    /// (`SECRET_NOT_GRANTED`): nothing was submitted.
    #[error(
        "{path}: secret {secret:?} is not granted to workflow {workflow:?} (operation {operation:?}); nothing was \
         submitted (an operator grants it: rara secrets grant {secret} --workflow {workflow})"
    )]
    SecretNotGranted { path: String, secret: String, workflow: String, operation: String },
    /// No registered definition of this name (at this version).
    #[error("{}", definition_not_found(name, *version))]
    DefinitionNotFound { name: String, version: Option<i32> },
    /// Registrations of one name kept taking the next version first: try again.
    #[error("workflow {name:?}: concurrent registrations kept taking the next version; try again")]
    RegisterContended { name: String },
    #[error("no schedule is named {0:?} (rara schedule list)")]
    ScheduleNotFound(String),
    #[error("a schedule named {0:?} exists already (rara schedule delete {0} first)")]
    ScheduleExists(String),
    /// A rerun that cannot be made as asked (`rara rerun`): why, for a person. Nothing was made.
    #[error("{0}; nothing was made")]
    RerunRefused(String),
    /// A database or connection failure, in sqlx's words. sqlx's message already spells its
    /// causes ("error returned from database: <the server's message>", "error communicating
    /// with database: <the I/O error>"), so this variant prints it and hands on no source:
    /// a printed chain (the CLI's `{:#}`) says each part once.
    #[error("{0}")]
    Database(sqlx::Error),
    /// A migration failed; like [`Error::Database`], sqlx's message holds its causes.
    #[error("{0}")]
    Migrate(sqlx::migrate::MigrateError),
}

fn definition_not_found(name: &str, version: Option<i32>) -> String {
    match version {
        Some(v) => format!("workflow {name:?} has no registered version {v} (rara workflow show {name})"),
        None => format!("no workflow {name:?} is registered (rara workflow register FILE)"),
    }
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        Error::Database(e)
    }
}

impl From<sqlx::migrate::MigrateError> for Error {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        Error::Migrate(e)
    }
}

impl Error {
    /// Whether trying again later may succeed (connection trouble), as opposed to a verdict.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Database(e) => {
                matches!(
                    e,
                    sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Protocol(_)
                ) || e.as_database_error().and_then(|d| d.code()).is_some_and(|c| {
                    // serialization_failure, deadlock_detected, admin_shutdown, cannot_connect_now
                    matches!(c.as_ref(), "40001" | "40P01" | "57P01" | "57P03")
                })
            }
            Error::RegisterContended { .. } => true,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the CLI prints: each message of the chain, joined.
    fn chain(e: &(dyn std::error::Error + 'static)) -> String {
        let mut parts = vec![e.to_string()];
        let mut source = e.source();
        while let Some(s) = source {
            parts.push(s.to_string());
            source = s.source();
        }
        parts.join(": ")
    }

    #[test]
    fn a_database_error_names_its_cause_once() {
        let e = Error::from(sqlx::Error::Io(std::io::Error::other("connection reset by peer")));
        let printed = chain(&e);
        assert_eq!(printed.matches("connection reset by peer").count(), 1, "{printed}");
        assert!(e.is_transient());
        let e = Error::from(sqlx::migrate::MigrateError::VersionMissing(7));
        assert_eq!(chain(&e).matches('7').count(), 1, "{}", chain(&e));
    }

    #[test]
    fn lease_lost_says_which_step_and_fence() {
        let e = Error::LeaseLost { step_id: Uuid::nil(), fence: 42 };
        assert!(chain(&e).contains("fence 42"));
    }
}
