//! What is wrong with a definition: each [`Problem`] at its field path, and the [`Error`] that
//! parsing or planning returns.

use serde::Serialize;

/// One thing wrong with a definition, at a field path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the definition is not valid JSON")]
    Json(#[from] serde_json::Error),
    #[error("the definition is not valid YAML")]
    Yaml(#[from] serde_saphyr::Error),
    #[error("the definition is invalid:\n{}", .0.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<Problem>),
}

#[cfg(test)]
pub(crate) mod testing {
    use super::Error;

    /// The error and its causes, as the CLI prints them (`{:#}`): `a: b: c`.
    pub(crate) fn chain(err: &Error) -> String {
        let mut text = err.to_string();
        let mut cause = std::error::Error::source(err);
        while let Some(c) = cause {
            text = format!("{text}: {c}");
            cause = c.source();
        }
        text
    }
}
