//! Secret references in a step's input (`{"$secret": "name"}`), resolved only at
//! execution, just before the executor is called, through a [`SecretResolver`] port.
//!
//! The stored input, the step message and every log line keep the reference; the resolved
//! input lives only in memory for the call. Whatever the executor gives back (output,
//! error, progress message, artifact) passes a [`Redactor`] that replaces every resolved
//! value with `***`, as an executor may echo a secret (`http.request` returning a body that
//! repeats a header).
//!
//! The resolvers themselves (environment and files, AWS Secrets Manager) live in
//! `rara-platform` (`rara_platform::secrets`); a batch executor built without one resolves
//! nothing ([`NoSecrets`]: every reference is [`Error::NotFound`]).

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use rara_domain::StepError;
use rara_domain::executor::{Artifact, ReportError, Reporter};
use rara_domain::secret_material::{self, Reference};
use rara_domain::step_error::codes;
use serde_json::Value;

/// What a resolved value is replaced with in outputs and errors.
pub const REDACTED: &str = "***";

/// Why a secret could not be resolved. No variant holds a secret value.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("secret {name:?} not found")]
    NotFound { name: String },
    #[error("secret name {name:?} is not valid here: {reason}")]
    InvalidName { name: String, reason: &'static str },
    #[error("secret {name:?} is not text")]
    NotText { name: String },
    #[error("secret {name:?} could not be fetched: {message}")]
    Unavailable { name: String, message: String },
}

impl Error {
    /// As the step's error: only an unavailable store may answer on another attempt.
    pub fn to_step_error(&self) -> StepError {
        let message = self.to_string();
        match self {
            Error::NotFound { name } => StepError::permanent(codes::SECRET_NOT_FOUND, message)
                .with_details(serde_json::json!({ "secret": name })),
            Error::Unavailable { name, .. } => StepError::retryable(codes::SECRET_UNAVAILABLE, message)
                .with_details(serde_json::json!({ "secret": name })),
            Error::InvalidName { name, .. } | Error::NotText { name } => {
                StepError::permanent(codes::INVALID_INPUT, message).with_details(serde_json::json!({ "secret": name }))
            }
        }
    }
}

/// Where secret values come from.
#[async_trait::async_trait]
pub trait SecretResolver: Send + Sync + 'static {
    async fn resolve(&self, name: &str) -> Result<String, Error>;
}

/// No resolver configured: every reference is [`Error::NotFound`].
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSecrets;

#[async_trait::async_trait]
impl SecretResolver for NoSecrets {
    async fn resolve(&self, name: &str) -> Result<String, Error> {
        Err(Error::NotFound { name: name.to_owned() })
    }
}

/// An input with its references replaced, and the redactor of the values put in.
#[derive(Debug)]
pub struct Resolved {
    pub input: Value,
    pub redactor: Redactor,
}

/// Replaces every `{"$secret": "name"}` of `input` with the secret's value.
pub async fn resolve_input(input: &Value, resolver: &dyn SecretResolver) -> Result<Value, StepError> {
    resolve(input, resolver).await.map(|r| r.input)
}

/// [`resolve_input`], keeping the values for redaction. An unknown secret is a permanent
/// `SECRET_NOT_FOUND` naming it; no error holds a value.
pub async fn resolve(input: &Value, resolver: &dyn SecretResolver) -> Result<Resolved, StepError> {
    let mut names = BTreeSet::new();
    collect(input, &mut names)?;
    if names.is_empty() {
        return Ok(Resolved { input: input.clone(), redactor: Redactor::default() });
    }
    let mut values = HashMap::with_capacity(names.len());
    for name in names {
        let value = resolver.resolve(name).await.map_err(|e| e.to_step_error())?;
        values.insert(name, value);
    }
    let input = substitute(input, &values);
    Ok(Resolved { input, redactor: Redactor::new(values.into_values()) })
}

fn collect<'a>(value: &'a Value, names: &mut BTreeSet<&'a str>) -> Result<(), StepError> {
    match (secret_material::reference(value), value) {
        (Some(Reference::Name(name)), _) => {
            names.insert(name);
        }
        (Some(Reference::Malformed), _) => {
            return Err(StepError::permanent(
                codes::INVALID_INPUT,
                format!("a malformed secret reference; write {{\"{}\": \"name\"}}", secret_material::REFERENCE_KEY),
            ));
        }
        (None, Value::Object(object)) => object.values().try_for_each(|v| collect(v, names))?,
        (None, Value::Array(items)) => items.iter().try_for_each(|v| collect(v, names))?,
        (None, _) => {}
    }
    Ok(())
}

fn substitute(value: &Value, values: &HashMap<&str, String>) -> Value {
    if let Some(Reference::Name(name)) = secret_material::reference(value)
        && let Some(secret) = values.get(name)
    {
        return Value::String(secret.clone());
    }
    match value {
        Value::Object(object) => {
            Value::Object(object.iter().map(|(k, v)| (k.clone(), substitute(v, values))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| substitute(v, values)).collect()),
        other => other.clone(),
    }
}

/// Replaces resolved secret values (and their JSON-escaped forms) with [`REDACTED`].
#[derive(Clone, Default)]
pub struct Redactor {
    /// Longest first, so a secret containing another is replaced whole.
    needles: Arc<[String]>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor").field("needles", &self.needles.len()).finish()
    }
}

impl Redactor {
    pub fn new(values: impl IntoIterator<Item = String>) -> Self {
        let mut needles = BTreeSet::new();
        for value in values.into_iter().filter(|v| !v.is_empty()) {
            let escaped = Value::String(value.clone()).to_string();
            let escaped = &escaped[1..escaped.len() - 1];
            if escaped != value {
                needles.insert(escaped.to_owned());
            }
            needles.insert(value);
        }
        let mut needles: Vec<String> = needles.into_iter().collect();
        needles.sort_by_key(|n| std::cmp::Reverse(n.len()));
        Redactor { needles: needles.into() }
    }

    pub fn is_empty(&self) -> bool {
        self.needles.is_empty()
    }

    pub fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut text = Cow::Borrowed(text);
        for needle in self.needles.iter() {
            if text.contains(needle.as_str()) {
                text = Cow::Owned(text.replace(needle.as_str(), REDACTED));
            }
        }
        text
    }

    /// Every string and key of `value`.
    pub fn json(&self, value: Value) -> Value {
        if self.is_empty() {
            return value;
        }
        match value {
            Value::String(s) => Value::String(self.text(&s).into_owned()),
            Value::Array(items) => Value::Array(items.into_iter().map(|v| self.json(v)).collect()),
            Value::Object(object) => {
                Value::Object(object.into_iter().map(|(k, v)| (self.text(&k).into_owned(), self.json(v))).collect())
            }
            other => other,
        }
    }

    pub fn error(&self, error: StepError) -> StepError {
        if self.is_empty() {
            return error;
        }
        StepError {
            code: self.text(&error.code).into_owned(),
            message: self.text(&error.message).into_owned(),
            retryable: error.retryable,
            details: self.json(error.details),
        }
    }
}

/// A reporter that redacts progress messages and artifacts before passing them on.
#[derive(Debug)]
pub struct RedactingReporter<R: ?Sized> {
    pub redactor: Redactor,
    pub inner: Arc<R>,
}

#[async_trait::async_trait]
impl<R: Reporter + ?Sized + 'static> Reporter for RedactingReporter<R> {
    async fn progress(&self, fraction: f64, message: &str) -> Result<(), ReportError> {
        self.inner.progress(fraction, &self.redactor.text(message)).await
    }

    async fn artifact(&self, artifact: Artifact) -> Result<(), ReportError> {
        let text = |s: String| self.redactor.text(&s).into_owned();
        let artifact = Artifact {
            name: text(artifact.name),
            uri: text(artifact.uri),
            media_type: artifact.media_type.map(text),
            size_bytes: artifact.size_bytes,
            digest: artifact.digest.map(text),
        };
        self.inner.artifact(artifact).await
    }

    async fn version(&self, version: &str) -> Result<(), ReportError> {
        self.inner.version(&self.redactor.text(version)).await
    }

    async fn store_artifact(
        &self,
        name: &str,
        body: rara_domain::executor::ArtifactBody,
        media_type: Option<&str>,
    ) -> Result<Artifact, ReportError> {
        let media_type = media_type.map(|m| self.redactor.text(m).into_owned());
        self.inner.store_artifact(&self.redactor.text(name), body, media_type.as_deref()).await
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `api-key` and `api.key` (one variable, `RARA_SECRET_API_KEY`, as the environment
    /// resolver reads them), nothing else.
    #[derive(Debug)]
    struct ApiKey;

    #[async_trait::async_trait]
    impl SecretResolver for ApiKey {
        async fn resolve(&self, name: &str) -> Result<String, Error> {
            match name {
                "api-key" | "api.key" => Ok("k-123".to_owned()),
                _ => Err(Error::NotFound { name: name.to_owned() }),
            }
        }
    }

    fn resolver() -> ApiKey {
        ApiKey
    }

    #[tokio::test]
    async fn references_anywhere_are_replaced_by_their_values() {
        let input = json!({"a": {"$secret": "api-key"}, "b": [1, {"c": {"$secret": "api.key"}}], "d": "plain"});
        let resolved = resolve_input(&input, &resolver()).await.unwrap();
        assert_eq!(resolved, json!({"a": "k-123", "b": [1, {"c": "k-123"}], "d": "plain"}));
    }

    #[tokio::test]
    async fn an_unknown_secret_is_a_permanent_error_naming_it() {
        let error = resolve_input(&json!({"a": {"$secret": "HOME"}}), &resolver()).await.unwrap_err();
        assert_eq!((error.code.as_str(), error.retryable), (codes::SECRET_NOT_FOUND, false));
        assert!(error.message.contains("\"HOME\""), "{error:?}");
        let error = resolve_input(&json!({"a": {"$secret": 1}}), &resolver()).await.unwrap_err();
        assert_eq!(error.code, codes::INVALID_INPUT);
    }

    #[test]
    fn redaction_covers_strings_keys_errors_and_escaped_forms() {
        let redactor = Redactor::new(["s3\"cret".to_owned(), String::new()]);
        let output = redactor.json(json!({"body": "x s3\"cret y", "raw": "{\"h\":\"s3\\\"cret\"}", "s3\"cret": 1}));
        assert_eq!(output, json!({"body": "x *** y", "raw": "{\"h\":\"***\"}", "***": 1}));
        let error = redactor.error(StepError::permanent("X", "saw s3\"cret").with_details(json!(["s3\"cret"])));
        assert_eq!((error.message.as_str(), error.details), ("saw ***", json!(["***"])));
        assert_eq!(Redactor::default().text("anything"), "anything");
    }
}
