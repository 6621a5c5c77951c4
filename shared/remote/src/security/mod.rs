//! How rara proves itself to remote executors and checks them ([`Security`]): TLS with a
//! private CA (`RARA_REMOTE_CA_FILE`) and an optional client identity (mTLS), a bearer
//! token sent on every call ([`Credential`]), and the per-attempt secrets
//! (`ExecuteRequest.attempt_secret`) that `Attach`, `Cancel` and a superseding `Execute`
//! must present.
//!
//! | variable | what |
//! |---|---|
//! | `RARA_REMOTE_CA_FILE` | PEM file of the CA(s) that sign the executors' certificates; set: only they are trusted for `https://` (unset: the webpki public roots) |
//! | `RARA_REMOTE_CLIENT_CERT_FILE`, `RARA_REMOTE_CLIENT_KEY_FILE` | PEM certificate chain and key rara presents (mTLS); both or neither |
//! | `RARA_REMOTE_TOKEN` | the bearer token sent as `authorization: Bearer …` on every call |
//! | `RARA_REMOTE_ATTEMPT_KEY` | the key of the per-attempt secrets (at least 32 characters), never sent |
//! | `RARA_REMOTE_CREDENTIALS_SECRET_ARN` | deployed: a Secrets Manager secret `{"token": …, "attempt_key": …}` fetched once at start instead of the two above ([`Security::with_credentials_json`]) |
//!
//! An attempt's secret is `hex(HMAC-SHA256(key, "rara.v1.attempt" ‖ step id ‖ attempt))`:
//! stable for the attempt (a re-attach from another container, an operator's cancel present
//! the same one), different for every attempt, and nothing stored or served (the lease token,
//! the fence) derives it, nor it them. Without `RARA_REMOTE_ATTEMPT_KEY` the key is derived
//! from the token (anyone holding the token can then forge secrets: a warning says so), and
//! without either it is a fixed key (no protection: a warning says so).
//!
//! Secret values never reach a log, an error or a `Debug` output.

use std::path::Path;
use std::sync::Arc;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use tonic::metadata::{AsciiMetadataValue, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};
use uuid::Uuid;

/// The shortest `RARA_REMOTE_ATTEMPT_KEY` accepted.
pub const MIN_ATTEMPT_KEY_CHARS: usize = 32;
/// The variable naming the credentials secret (deployed; fetched by the function at start).
pub const CREDENTIALS_SECRET_VAR: &str = "RARA_REMOTE_CREDENTIALS_SECRET_ARN";
/// The most a credentials secret may hold.
pub const MAX_CREDENTIALS_BYTES: usize = 8 * 1024;

/// What is wrong with the security settings (the values themselves are never repeated).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{var}: cannot read {path:?}")]
    Read {
        var: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("RARA_REMOTE_CLIENT_CERT_FILE and RARA_REMOTE_CLIENT_KEY_FILE go together: set both or neither")]
    HalfIdentity,
    #[error("RARA_REMOTE_TOKEN must be printable ASCII without spaces (it travels in gRPC metadata)")]
    Token,
    #[error("RARA_REMOTE_ATTEMPT_KEY must be at least {MIN_ATTEMPT_KEY_CHARS} characters")]
    AttemptKey,
    #[error("the secret of RARA_REMOTE_CREDENTIALS_SECRET_ARN {0}")]
    Credentials(String),
}

impl Error {
    /// The variable at fault.
    pub fn var(&self) -> &'static str {
        match self {
            Error::Read { var, .. } => var,
            Error::HalfIdentity => "RARA_REMOTE_CLIENT_KEY_FILE",
            Error::Token => "RARA_REMOTE_TOKEN",
            Error::AttemptKey => "RARA_REMOTE_ATTEMPT_KEY",
            Error::Credentials(_) => CREDENTIALS_SECRET_VAR,
        }
    }
}

/// A secret value: compared, sent or hashed, never printed.
#[derive(Clone)]
pub struct Secret(Arc<str>);

impl Secret {
    pub fn new(value: impl Into<Arc<str>>) -> Self {
        Self(value.into())
    }

    /// The value, for the one place that sends or hashes it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// How rara talks to remote executors: TLS trust and identity, the bearer token, the key
/// of the per-attempt secrets. [`Security::default`]: public roots, no token, a fixed key.
#[derive(Debug, Clone, Default)]
pub struct Security {
    /// PEM of the private CA(s); `None`: the webpki public roots.
    ca_pem: Option<Vec<u8>>,
    /// PEM certificate chain and key rara presents (mTLS).
    identity: Option<(Vec<u8>, Secret)>,
    token: Option<Secret>,
    attempt_key: Option<Secret>,
}

impl Security {
    /// Reads the variables of the module's table through `lookup` (files are read now);
    /// blank values count as unset.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let var = |name: &str| lookup(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let mut security = Security::default();
        if let Some(path) = var("RARA_REMOTE_CA_FILE") {
            security.ca_pem = Some(read("RARA_REMOTE_CA_FILE", &path)?);
        }
        match (var("RARA_REMOTE_CLIENT_CERT_FILE"), var("RARA_REMOTE_CLIENT_KEY_FILE")) {
            (None, None) => {}
            (Some(cert), Some(key)) => {
                let cert = read("RARA_REMOTE_CLIENT_CERT_FILE", &cert)?;
                let key = read("RARA_REMOTE_CLIENT_KEY_FILE", &key)?;
                let key = String::from_utf8(key).map_err(|_| Error::HalfIdentity)?;
                security.identity = Some((cert, Secret::new(key)));
            }
            _ => return Err(Error::HalfIdentity),
        }
        if let Some(token) = var("RARA_REMOTE_TOKEN") {
            security = security.with_token(token)?;
        }
        if let Some(key) = var("RARA_REMOTE_ATTEMPT_KEY") {
            security = security.with_attempt_key(key)?;
        }
        if var(CREDENTIALS_SECRET_VAR).is_some() && (security.token.is_some() || security.attempt_key.is_some()) {
            return Err(Error::Credentials(
                "replaces RARA_REMOTE_TOKEN and RARA_REMOTE_ATTEMPT_KEY: set the secret or the variables, not both"
                    .into(),
            ));
        }
        Ok(security)
    }

    /// Takes the token and the attempt key from a credentials secret's text: a JSON object
    /// `{"token": "...", "attempt_key": "..."}` (the token required, the first of a
    /// comma-separated list while rotating; the key recommended; no other key), at most
    /// [`MAX_CREDENTIALS_BYTES`]. Errors name what is wrong, never a value.
    pub fn with_credentials_json(self, text: &str) -> Result<Self, Error> {
        let bad = |why: &str| Error::Credentials(why.to_owned());
        if text.len() > MAX_CREDENTIALS_BYTES {
            return Err(bad(&format!("is over {MAX_CREDENTIALS_BYTES} bytes")));
        }
        let object: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text)
            .map_err(|_| bad("is not a JSON object {\"token\": \"...\", \"attempt_key\": \"...\"}"))?;
        if let Some(key) = object.keys().find(|k| !matches!(k.as_str(), "token" | "attempt_key")) {
            let shown: String = key.chars().take(40).collect();
            return Err(bad(&format!("has a key {shown:?} it does not know (token, attempt_key)")));
        }
        let text_of = |key: &str| match object.get(key) {
            None => Ok(None),
            Some(serde_json::Value::String(value)) => Ok(Some(value.clone())),
            Some(_) => Err(bad(&format!("has a `{key}` that is not a string"))),
        };
        // The server's format (RARA_EXECUTOR_TOKENS) is a list, `new,old` while rotating:
        // rara sends the first.
        let tokens = text_of("token")?.ok_or_else(|| bad("has no `token`"))?;
        let token = tokens.split(',').next().unwrap_or_default().trim().to_owned();
        let security =
            self.with_token(token).map_err(|_| bad("has a `token` that is not printable ASCII without spaces"))?;
        match text_of("attempt_key")? {
            None => Ok(security),
            Some(key) => security
                .with_attempt_key(key)
                .map_err(|_| bad(&format!("has an `attempt_key` shorter than {MIN_ATTEMPT_KEY_CHARS} characters"))),
        }
    }

    /// Trusts only the CA(s) of `pem` for `https://` endpoints.
    pub fn with_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca_pem = Some(pem.into());
        self
    }

    /// Presents the certificate chain `cert_pem` with its key `key_pem` (mTLS).
    pub fn with_identity_pem(mut self, cert_pem: impl Into<Vec<u8>>, key_pem: impl Into<Arc<str>>) -> Self {
        self.identity = Some((cert_pem.into(), Secret::new(key_pem)));
        self
    }

    /// Sends `token` as `authorization: Bearer <token>` on every call.
    pub fn with_token(mut self, token: impl Into<Arc<str>>) -> Result<Self, Error> {
        let token = Secret::new(token);
        if token.expose().is_empty() || !token.expose().bytes().all(|b| b.is_ascii_graphic()) {
            return Err(Error::Token);
        }
        self.token = Some(token);
        Ok(self)
    }

    /// Derives the per-attempt secrets under `key` (at least [`MIN_ATTEMPT_KEY_CHARS`]).
    pub fn with_attempt_key(mut self, key: impl Into<Arc<str>>) -> Result<Self, Error> {
        let key = Secret::new(key);
        if key.expose().chars().count() < MIN_ATTEMPT_KEY_CHARS {
            return Err(Error::AttemptKey);
        }
        self.attempt_key = Some(key);
        Ok(self)
    }

    /// Whether a bearer token is sent.
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// The TLS settings of an `https://` endpoint (its host names the server to verify).
    pub(crate) fn tls_config(&self) -> ClientTlsConfig {
        let mut tls = ClientTlsConfig::new();
        tls = match &self.ca_pem {
            Some(pem) => tls.ca_certificate(Certificate::from_pem(pem)),
            None => tls.with_webpki_roots(),
        };
        if let Some((cert, key)) = &self.identity {
            tls = tls.identity(Identity::from_pem(cert, key.expose()));
        }
        tls
    }

    /// The interceptor that puts the token on every call.
    pub fn credential(&self) -> Credential {
        let header = self.token.as_ref().and_then(|token| {
            let mut value: AsciiMetadataValue = MetadataValue::try_from(format!("Bearer {}", token.expose())).ok()?;
            value.set_sensitive(true);
            Some(value)
        });
        Credential { header }
    }

    /// A client of `channel` that sends the token on every call.
    pub fn client(&self, channel: Channel) -> Client {
        crate::pb::executor_service_client::ExecutorServiceClient::with_interceptor(channel, self.credential())
    }

    /// The secret of attempt `attempt` of `step_id` (64 lowercase hex characters).
    pub fn attempt_secret(&self, step_id: Uuid, attempt: u32) -> String {
        let mut mac = self.attempt_mac();
        mac.update(b"rara.v1.attempt");
        mac.update(step_id.as_bytes());
        mac.update(&attempt.to_be_bytes());
        hex(&mac.finalize().into_bytes())
    }

    /// The secrets of the attempts before `attempt` of `step_id`, first to last
    /// (`ExecuteRequest.prior_attempt_secrets`).
    pub fn prior_attempt_secrets(&self, step_id: Uuid, attempt: u32) -> Vec<String> {
        (1..attempt).map(|earlier| self.attempt_secret(step_id, earlier)).collect()
    }

    /// What a start-up log line should warn about (no values), if anything.
    pub fn weaknesses(&self) -> Vec<&'static str> {
        let mut weak = Vec::new();
        if self.token.is_none() {
            weak.push("no RARA_REMOTE_TOKEN: calls to remote executors carry no credential");
        }
        if self.attempt_key.is_none() {
            weak.push(match self.token {
                Some(_) => "no RARA_REMOTE_ATTEMPT_KEY: attempt secrets derive from the token, so any token holder can forge them",
                None => "no RARA_REMOTE_ATTEMPT_KEY: attempt secrets use a fixed key and protect nothing",
            });
        }
        weak
    }

    fn attempt_mac(&self) -> Hmac<Sha256> {
        let key: Vec<u8> = match (&self.attempt_key, &self.token) {
            (Some(key), _) => key.expose().as_bytes().to_vec(),
            (None, Some(token)) => {
                let mut derive = new_mac(token.expose().as_bytes());
                derive.update(b"rara.v1.attempt-key");
                derive.finalize().into_bytes().to_vec()
            }
            (None, None) => b"rara.v1.attempt-key.unprotected".to_vec(),
        };
        new_mac(&key)
    }
}

fn new_mac(key: &[u8]) -> Hmac<Sha256> {
    // HMAC takes keys of any length.
    <Hmac<Sha256> as Mac>::new_from_slice(key).unwrap_or_else(|_| unreachable!("HMAC accepts any key length"))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

fn read(var: &'static str, path: &str) -> Result<Vec<u8>, Error> {
    std::fs::read(Path::new(path)).map_err(|source| Error::Read { var, path: path.to_owned(), source })
}

/// A `rara.v1` client whose every call carries the token ([`Security::client`]).
pub type Client = crate::pb::executor_service_client::ExecutorServiceClient<InterceptedService<Channel, Credential>>;

/// Puts `authorization: Bearer <token>` (marked sensitive) on every request; nothing when
/// no token is configured.
#[derive(Clone, Default)]
pub struct Credential {
    header: Option<AsciiMetadataValue>,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential").field("token", &self.header.as_ref().map(|_| "<redacted>")).finish()
    }
}

impl Interceptor for Credential {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(header) = &self.header {
            request.metadata_mut().insert("authorization", header.clone());
        }
        Ok(request)
    }
}

#[cfg(test)]
mod tests;
