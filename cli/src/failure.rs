//! [`Failure`]: an error with the exit code a script can rely on.

use crate::exit::ExitCode;

/// A failure with the exit code a script can rely on.
#[derive(Debug)]
pub struct Failure {
    pub code: ExitCode,
    pub error: anyhow::Error,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(error: E) -> Self {
        let error = error.into();
        let code = match error.downcast_ref::<rara_store::Error>() {
            Some(
                rara_store::Error::RunNotFound(_)
                | rara_store::Error::StepNotFound(_)
                | rara_store::Error::DefinitionNotFound { .. }
                | rara_store::Error::ScheduleNotFound(_),
            ) => ExitCode::NotFound,
            Some(rara_store::Error::IdempotencyConflict { .. }) => ExitCode::IdempotencyConflict,
            _ if error.downcast_ref::<rara_domain::workflow::Error>().is_some() => ExitCode::InvalidWorkflow,
            _ => ExitCode::Failure,
        };
        Failure { code, error }
    }
}

impl Failure {
    /// A failure exiting with `code`, saying `message`.
    pub fn new(code: ExitCode, message: impl std::fmt::Display) -> Self {
        Failure { code, error: anyhow::anyhow!("{message}") }
    }

    /// A failure with only an exit code (its message was already printed).
    pub fn silent(code: ExitCode) -> Self {
        Failure { code, error: anyhow::anyhow!("") }
    }
}
