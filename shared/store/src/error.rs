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
    /// sqlx's own message says what failed ("error returned from database: …", "pool timed
    /// out …"); `transparent` prints it once and hands on its source, so a printed chain
    /// names each cause once.
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

impl Error {
    /// Whether trying again later may succeed (connection trouble), as opposed to a verdict.
    pub fn is_retryable(&self) -> bool {
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
            _ => false,
        }
    }
}
