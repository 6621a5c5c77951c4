//! The API's [`Error`]: every failure answers `{code, message, field, exit_code}` with a 4xx or
//! 5xx status. `exit_code` is the one `rara` exits with for the same failure (2 bad usage, 3 not
//! found, 4 invalid workflow definition, 1 anything else), so a script reads both alike.

use axum::Json;
use axum::extract::rejection::{FormRejection, JsonRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The body of every error response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// A stable machine-readable code: `bad_request`, `unauthorized`, `forbidden`, `not_found`,
    /// `misdirected` (a `Host` the server does not answer to), `invalid_workflow`, `conflict`,
    /// `payload_too_large`, `unsupported_media_type`, `internal`, `unavailable`.
    pub code: String,
    /// What went wrong, for a person.
    pub message: String,
    /// The request field at fault (a JSON field, a query parameter, a path of the definition),
    /// when there is one.
    pub field: Option<String>,
    /// The exit code `rara` uses for the same failure.
    pub exit_code: u8,
}

/// A failure of a request, with its HTTP status.
#[derive(Debug, Clone, PartialEq)]
pub struct Error {
    pub status: StatusCode,
    pub body: ErrorBody,
}

impl Error {
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>, exit_code: u8) -> Self {
        Error { status, body: ErrorBody { code: code.to_owned(), message: message.into(), field: None, exit_code } }
    }

    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.body.field = Some(field.into());
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message, 2)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message, 3)
    }

    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this request changes state: send the token `rara ui` printed as `Authorization: Bearer <token>`",
            1,
        )
    }

    /// A `401` that says what to present.
    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message, 1)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message, 1)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message, 1)
    }

    fn rejection(status: StatusCode, message: String) -> Self {
        match status {
            StatusCode::PAYLOAD_TOO_LARGE => Self::new(status, "payload_too_large", message, 2),
            StatusCode::UNSUPPORTED_MEDIA_TYPE => Self::new(status, "unsupported_media_type", message, 2),
            _ => Self::new(StatusCode::BAD_REQUEST, "bad_request", message, 2),
        }
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        (self.status, Json(self.body)).into_response()
    }
}

impl From<rara_store::Error> for Error {
    fn from(e: rara_store::Error) -> Self {
        match &e {
            rara_store::Error::RunNotFound(_) => Self::not_found(e.to_string()),
            rara_store::Error::StepNotFound(_) => Self::not_found(e.to_string()),
            rara_store::Error::DefinitionNotFound { .. } | rara_store::Error::ScheduleNotFound(_) => {
                Self::not_found(e.to_string())
            }
            rara_store::Error::ScheduleExists(_) => Self::conflict(e.to_string()).with_field("name"),
            // `rara submit` exits 8 for the same conflict.
            rara_store::Error::IdempotencyConflict { .. } => {
                Self::new(StatusCode::CONFLICT, "conflict", e.to_string(), 8).with_field("idempotency_key")
            }
            rara_store::Error::SecretNotGranted { path, .. } => {
                let code = rara_domain::step_error::codes::SECRET_NOT_GRANTED;
                Self::new(StatusCode::FORBIDDEN, code, e.to_string(), 1).with_field(format!("definition.{path}"))
            }
            _ if e.is_transient() => {
                tracing::warn!(error = %e, "the store is unavailable");
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "the database is unavailable; try again", 1)
            }
            _ => {
                tracing::error!(error = %e, "a store request failed");
                Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "the request failed in the store", 1)
            }
        }
    }
}

/// A bulk action's failure: too much matched (422 `too_many`, nothing changed), or the store's.
impl From<rara_operator::bulk::Error> for Error {
    fn from(e: rara_operator::bulk::Error) -> Self {
        match e {
            rara_operator::bulk::Error::TooMany { .. } => {
                Self::new(StatusCode::UNPROCESSABLE_ENTITY, "too_many", e.to_string(), 2)
            }
            rara_operator::bulk::Error::Store(e) => e.into(),
        }
    }
}

/// A submission's failure: the store's, or its large inputs could not be written to the artifact
/// store (503 `unavailable`, nothing stored).
impl From<rara_operator::inputs::Error> for Error {
    fn from(e: rara_operator::inputs::Error) -> Self {
        match e {
            rara_operator::inputs::Error::Store(e) => e.into(),
            e @ rara_operator::inputs::Error::Artifacts { .. } => {
                let source = std::error::Error::source(&e).map(ToString::to_string).unwrap_or_default();
                tracing::warn!(error = %e, %source, "the run's inputs could not be offloaded");
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", format!("{e}; try again"), 1)
                    .with_field("inputs")
            }
        }
    }
}

impl From<rara_domain::workflow::Error> for Error {
    fn from(e: rara_domain::workflow::Error) -> Self {
        use rara_domain::workflow::Error as W;
        let field = match &e {
            W::Invalid(problems) => problems.first().map(|p| format!("definition.{}", p.path)),
            _ => Some("definition".to_owned()),
        };
        // The problems of an invalid definition each on a line, like the CLI prints them.
        let message = match &e {
            W::Json(cause) => format!("{e}: {cause}"),
            W::Yaml(cause) => format!("{e}: {cause}"),
            _ => e.to_string(),
        };
        let error = Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_workflow", message, 4);
        match field {
            Some(field) => error.with_field(field),
            None => error,
        }
    }
}

/// The field serde names in a message such as "unknown field `x`" or "missing field `x`".
pub(crate) fn serde_field(message: &str) -> Option<String> {
    let start = message.find("field `")? + "field `".len();
    let end = start + message[start..].find('`')?;
    Some(message[start..end].to_owned())
}

impl From<axum::extract::rejection::PathRejection> for Error {
    fn from(rejection: axum::extract::rejection::PathRejection) -> Self {
        Error::bad_request(format!("the id in the path is not a UUID: {}", rejection.body_text())).with_field("id")
    }
}

impl From<JsonRejection> for Error {
    fn from(rejection: JsonRejection) -> Self {
        let message = rejection.body_text();
        let field = serde_field(&message);
        let error = Self::rejection(rejection.status(), message);
        match field {
            Some(field) => error.with_field(field),
            None => error,
        }
    }
}

impl From<axum::extract::rejection::BytesRejection> for Error {
    fn from(rejection: axum::extract::rejection::BytesRejection) -> Self {
        Self::rejection(rejection.status(), rejection.body_text())
    }
}

impl From<QueryRejection> for Error {
    fn from(rejection: QueryRejection) -> Self {
        Self::rejection(rejection.status(), rejection.body_text())
    }
}

impl From<FormRejection> for Error {
    fn from(rejection: FormRejection) -> Self {
        Self::rejection(rejection.status(), rejection.body_text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_field_of_a_serde_message_is_the_quoted_name() {
        assert_eq!(serde_field("unknown field `colour`, expected one of `a`").as_deref(), Some("colour"));
        assert_eq!(serde_field("expected value at line 1"), None);
        assert_eq!(serde_field("invalid type: string, expected `u32`"), None);
    }
}
