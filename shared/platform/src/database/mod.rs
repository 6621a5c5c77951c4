//! Where the functions' Postgres credentials come from. Locally: `DATABASE_URL`. Deployed:
//! a Secrets Manager secret in the RDS JSON shape (`username`, `password`, `host`, `port`,
//! `dbname`, maybe `engine`) named by `RARA_DATABASE_SECRET_ARN`, fetched once at init,
//! with `RARA_DATABASE_HOST` (e.g. the RDS Proxy endpoint) and `RARA_DATABASE_NAME`
//! replacing the secret's host and dbname when set.
//!
//! TLS through a secret is `require` unless `RARA_DATABASE_SSL_MODE` says otherwise;
//! `verify-ca` and `verify-full` check the server's certificate against the CA bundle of
//! `RARA_DATABASE_SSL_ROOT_CERT` (for RDS: the global bundle,
//! <https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem>; docs: operating/deploy.md
//! "Database TLS"), and refuse to start without one.
//!
//! The secret goes straight into [`PgConnectOptions`]: no URL holding the password is ever
//! built, no error carries the secret or the password (serde's messages, which can quote a
//! value, are not kept), and every `Debug` here redacts the password.
//!
//! # Layout
//!
//! - this file: [`DatabaseSource`] from the environment, [`ConnectOptions`], the errors, and the
//!   Secrets Manager port ([`SecretFetcher`]) with its adapter ([`SecretsManager`]).
//! - `secret.rs`: the RDS JSON secret read into connect options ([`options_from_secret`]).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use rara_domain::config::{self, Config, Vars};
use sqlx::postgres::{PgConnectOptions, PgSslMode};

mod secret;
pub use secret::options_from_secret;

pub const SECRET_ARN_VAR: &str = "RARA_DATABASE_SECRET_ARN";
pub const HOST_VAR: &str = "RARA_DATABASE_HOST";
pub const NAME_VAR: &str = "RARA_DATABASE_NAME";
pub const SSL_MODE_VAR: &str = "RARA_DATABASE_SSL_MODE";
/// A PEM file of the CA(s) that sign the database's certificate (`verify-ca`, `verify-full`).
pub const SSL_ROOT_CERT_VAR: &str = "RARA_DATABASE_SSL_ROOT_CERT";
/// libpq's (and sqlx's) own name for the same file, honoured as a fallback.
pub const PG_SSL_ROOT_CERT_VAR: &str = "PGSSLROOTCERT";
/// The port when the secret names none.
pub const DEFAULT_PORT: u16 = 5432;
/// TLS is required when connecting through a secret (RDS, RDS Proxy) unless
/// `RARA_DATABASE_SSL_MODE` says otherwise.
pub const DEFAULT_SECRET_SSL_MODE: PgSslMode = PgSslMode::Require;

/// Why the database credentials could not be obtained. No variant holds the secret.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot fetch the database secret {arn}: {}", chain(.source.as_ref()))]
    Fetch { arn: String, source: Box<dyn std::error::Error + Send + Sync> },
    #[error("the database secret {arn} has no SecretString (a binary secret?); expected RDS JSON")]
    NotText { arn: String },
    #[error("the database secret {arn} is not JSON (syntax error at line {line}, column {column})")]
    NotJson { arn: String, line: usize, column: usize },
    #[error("the database secret {arn} is not a JSON object; expected RDS JSON (username, password, host, ...)")]
    NotAnObject { arn: String },
    #[error("the database secret {arn} has no `{field}`{hint}")]
    MissingField { arn: String, field: &'static str, hint: &'static str },
    #[error("the database secret {arn} has an invalid `{field}`: expected {expected}")]
    InvalidField { arn: String, field: &'static str, expected: &'static str },
    #[error("DATABASE_URL is not valid: {0}")]
    Url(#[source] sqlx::Error),
    #[error("cannot read the database's CA bundle {path} ({SSL_ROOT_CERT_VAR})")]
    RootCert { path: PathBuf, source: std::io::Error },
}

impl Error {
    /// Only a failed fetch may succeed when tried again; a malformed secret will not.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Fetch { .. })
    }
}

/// An error with its sources, as the AWS SDK's `Display` alone says only "service error".
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    aws_sdk_secretsmanager::error::DisplayErrorContext(error).to_string()
}

/// A connection that failed, naming where it went: a TLS failure alone (an unknown issuer, say)
/// does not say which server it was.
#[derive(Debug, thiserror::Error)]
#[error("cannot connect to Postgres at {address} (sslmode {ssl_mode})")]
pub struct ConnectError {
    pub address: String,
    pub ssl_mode: &'static str,
    #[source]
    pub source: sqlx::Error,
}

/// Where the credentials come from.
#[derive(Clone)]
pub enum DatabaseSource {
    /// `DATABASE_URL` (the default of [`Config`] when unset). May hold a password.
    Url(String),
    /// `RARA_DATABASE_SECRET_ARN`, with the optional overrides and the TLS mode.
    Secret {
        arn: String,
        /// `RARA_DATABASE_HOST`: replaces the secret's `host`.
        host_override: Option<String>,
        /// `RARA_DATABASE_NAME`: replaces the secret's `dbname`.
        name_override: Option<String>,
        /// `RARA_DATABASE_SSL_MODE`, default [`DEFAULT_SECRET_SSL_MODE`].
        ssl_mode: PgSslMode,
        /// `RARA_DATABASE_SSL_ROOT_CERT`: the CA bundle the server's certificate is checked
        /// against (required by `verify-ca` and `verify-full` unless `PGSSLROOTCERT` names one).
        root_cert: Option<PathBuf>,
    },
}

impl fmt::Debug for DatabaseSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DatabaseSource::Url(_) => f.debug_tuple("Url").field(&"<redacted>").finish(),
            DatabaseSource::Secret { arn, host_override, name_override, ssl_mode, root_cert } => f
                .debug_struct("Secret")
                .field("arn", arn)
                .field("host_override", host_override)
                .field("name_override", name_override)
                .field("ssl_mode", ssl_mode)
                .field("root_cert", root_cert)
                .finish(),
        }
    }
}

impl DatabaseSource {
    /// The secret when `RARA_DATABASE_SECRET_ARN` is set (empty values count as unset),
    /// else the configuration's `DATABASE_URL`.
    pub fn from_lookup(core: &Config, lookup: impl Fn(&str) -> Option<String>) -> Result<Self, config::Error> {
        let vars = Vars(&lookup);
        let var = |key: &str| vars.optional(key);
        let Some(arn) = var(SECRET_ARN_VAR) else {
            return Ok(DatabaseSource::Url(core.database_url.clone()));
        };
        let ssl_mode = match var(SSL_MODE_VAR) {
            None => DEFAULT_SECRET_SSL_MODE,
            Some(raw) => parse_ssl_mode(&raw).ok_or_else(|| config::Error::Invalid {
                var: SSL_MODE_VAR,
                value: raw,
                reason: "expected disable, allow, prefer, require, verify-ca or verify-full".into(),
            })?,
        };
        let root_cert = var(SSL_ROOT_CERT_VAR).map(PathBuf::from);
        let verifies = matches!(ssl_mode, PgSslMode::VerifyCa | PgSslMode::VerifyFull);
        if verifies && root_cert.is_none() && var(PG_SSL_ROOT_CERT_VAR).is_none() {
            return Err(config::Error::Invalid {
                var: SSL_MODE_VAR,
                value: var(SSL_MODE_VAR).unwrap_or_default(),
                reason: format!(
                    "checking the database's certificate needs its CA bundle: set {SSL_ROOT_CERT_VAR} to the PEM \
                     file (for RDS the global bundle, https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem)"
                ),
            });
        }
        Ok(DatabaseSource::Secret {
            arn,
            host_override: var(HOST_VAR),
            name_override: var(NAME_VAR),
            ssl_mode,
            root_cert,
        })
    }

    /// The connect options: the URL parsed, or the secret fetched through `fetcher` and parsed.
    pub async fn connect_options(&self, fetcher: &dyn SecretFetcher) -> Result<ConnectOptions, Error> {
        match self {
            DatabaseSource::Url(url) => options_from_url(url),
            DatabaseSource::Secret { arn, host_override, name_override, ssl_mode, root_cert } => {
                let secret = fetcher.fetch(arn).await?;
                let options =
                    options_from_secret(arn, &secret, host_override.as_deref(), name_override.as_deref(), *ssl_mode)?;
                match root_cert {
                    None => Ok(options),
                    Some(path) => options.with_root_cert(path),
                }
            }
        }
    }

    /// [`connect_options`](Self::connect_options) with a Secrets Manager client built from
    /// the SDK environment, only when the source is a secret.
    /// `aws` is the SDK configuration (with rara's timeouts) a secret is fetched with.
    pub async fn connect_options_from_env(&self, aws: &aws_config::SdkConfig) -> Result<ConnectOptions, Error> {
        match self {
            DatabaseSource::Url(url) => options_from_url(url),
            DatabaseSource::Secret { .. } => self.connect_options(&SecretsManager::from_config(aws)).await,
        }
    }
}

fn parse_ssl_mode(raw: &str) -> Option<PgSslMode> {
    Some(match raw.to_ascii_lowercase().as_str() {
        "disable" => PgSslMode::Disable,
        "allow" => PgSslMode::Allow,
        "prefer" => PgSslMode::Prefer,
        "require" => PgSslMode::Require,
        "verify-ca" => PgSslMode::VerifyCa,
        "verify-full" => PgSslMode::VerifyFull,
        _ => return None,
    })
}

fn options_from_url(url: &str) -> Result<ConnectOptions, Error> {
    PgConnectOptions::from_str(url).map(ConnectOptions).map_err(Error::Url)
}

/// Postgres connect options that may hold a password; `Debug` redacts it.
#[derive(Clone)]
pub struct ConnectOptions(pub(crate) PgConnectOptions);

impl ConnectOptions {
    /// These options checking the server's certificate against the PEM bundle at `path`, read
    /// here so that a missing file fails at start, naming it.
    pub fn with_root_cert(self, path: &std::path::Path) -> Result<Self, Error> {
        let pem = std::fs::read(path).map_err(|source| Error::RootCert { path: path.to_owned(), source })?;
        Ok(ConnectOptions(self.0.ssl_root_cert_from_pem(pem)))
    }

    /// `source`, a failure to connect with these options, naming the host, port and TLS mode.
    pub fn connect_error(&self, source: sqlx::Error) -> ConnectError {
        let ssl_mode = match self.0.get_ssl_mode() {
            PgSslMode::Disable => "disable",
            PgSslMode::Allow => "allow",
            PgSslMode::Prefer => "prefer",
            PgSslMode::Require => "require",
            PgSslMode::VerifyCa => "verify-ca",
            PgSslMode::VerifyFull => "verify-full",
        };
        ConnectError { address: format!("{}:{}", self.0.get_host(), self.0.get_port()), ssl_mode, source }
    }

    pub fn into_inner(self) -> PgConnectOptions {
        self.0
    }

    pub fn get(&self) -> &PgConnectOptions {
        &self.0
    }
}

impl fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("host", &self.0.get_host())
            .field("port", &self.0.get_port())
            .field("username", &self.0.get_username())
            .field("password", &"<redacted>")
            .field("database", &self.0.get_database())
            .field("ssl_mode", &self.0.get_ssl_mode())
            .finish()
    }
}

/// Fetches a secret's text by ARN (the port in front of Secrets Manager).
#[async_trait::async_trait]
pub trait SecretFetcher: Send + Sync + fmt::Debug {
    async fn fetch(&self, arn: &str) -> Result<String, Error>;
}

/// The Secrets Manager adapter: one client, built once at init.
#[derive(Debug, Clone)]
pub struct SecretsManager {
    client: aws_sdk_secretsmanager::Client,
}

impl SecretsManager {
    pub fn new(client: aws_sdk_secretsmanager::Client) -> Self {
        Self { client }
    }

    /// A client of `config` (region, credentials, `AWS_ENDPOINT_URL`, timeouts).
    pub fn from_config(config: &aws_config::SdkConfig) -> Self {
        Self::new(crate::aws::secrets_manager_client(config))
    }
}

#[async_trait::async_trait]
impl SecretFetcher for SecretsManager {
    async fn fetch(&self, arn: &str) -> Result<String, Error> {
        crate::aws::secret_text(&self.client, arn, "Ref:DatabaseSecretArn").await.map_err(|e| match e {
            crate::aws::SecretTextError::Fetch { arn, detail } => Error::Fetch { arn, source: detail.into() },
            crate::aws::SecretTextError::NotText { arn } => Error::NotText { arn },
        })
    }
}

#[cfg(test)]
mod tests;
