//! Why a body is not a step message.

use super::{FORMAT_VERSION, MAX_BODY_BYTES, PACKED_VERSION};

/// Why a body is not a step message. The reason travels with the message to the DLQ.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("message body of {0} bytes exceeds the {MAX_BODY_BYTES}-byte limit of a step message")]
    TooLarge(usize),
    #[error(
        "message format version {0} is not supported (this build reads versions {FORMAT_VERSION} and {PACKED_VERSION})"
    )]
    UnsupportedVersion(u64),
    #[error("malformed step message: {0}")]
    Malformed(String),
}

impl Error {
    /// A stable code for metrics and the DLQ reason attribute.
    pub fn code(&self) -> &'static str {
        match self {
            Error::TooLarge(_) => "MESSAGE_TOO_LARGE",
            Error::UnsupportedVersion(_) => "UNSUPPORTED_MESSAGE_VERSION",
            Error::Malformed(_) => "MALFORMED_MESSAGE",
        }
    }
}
