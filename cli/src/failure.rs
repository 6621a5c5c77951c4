//! [`Failure`]: an error with the exit code a script can rely on.

/// A failure with the exit code a script can rely on.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub error: anyhow::Error,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(error: E) -> Self {
        let error = error.into();
        let code = match error.downcast_ref::<rara_store::Error>() {
            Some(rara_store::Error::RunNotFound(_) | rara_store::Error::StepNotFound(_)) => 3,
            Some(rara_store::Error::IdempotencyConflict { .. }) => 8,
            _ if error.downcast_ref::<rara_domain::workflow::Error>().is_some() => 4,
            _ => 1,
        };
        Failure { code, error }
    }
}

impl Failure {
    /// A failure with only an exit code (its message was already printed).
    pub fn silent(code: u8) -> Self {
        Failure { code, error: anyhow::anyhow!("") }
    }
}
