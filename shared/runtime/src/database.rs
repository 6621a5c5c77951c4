//! Where the functions' Postgres credentials come from. Locally: `DATABASE_URL`. Deployed:
//! a Secrets Manager secret in the RDS JSON shape (`username`, `password`, `host`, `port`,
//! `dbname`, maybe `engine`) named by `RARA_DATABASE_SECRET_ARN`, fetched once at init,
//! with `RARA_DATABASE_HOST` (e.g. the RDS Proxy endpoint) and `RARA_DATABASE_NAME`
//! replacing the secret's host and dbname when set.
//!
//! The secret goes straight into [`PgConnectOptions`]: no URL holding the password is ever
//! built, no error carries the secret or the password (serde's messages, which can quote a
//! value, are not kept), and every `Debug` here redacts the password.

use std::fmt;
use std::str::FromStr;

use rara_domain::config::{self, Config, Vars};
use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgSslMode};

pub const SECRET_ARN_VAR: &str = "RARA_DATABASE_SECRET_ARN";
pub const HOST_VAR: &str = "RARA_DATABASE_HOST";
pub const NAME_VAR: &str = "RARA_DATABASE_NAME";
pub const SSL_MODE_VAR: &str = "RARA_DATABASE_SSL_MODE";
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
    },
}

impl fmt::Debug for DatabaseSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DatabaseSource::Url(_) => f.debug_tuple("Url").field(&"<redacted>").finish(),
            DatabaseSource::Secret { arn, host_override, name_override, ssl_mode } => f
                .debug_struct("Secret")
                .field("arn", arn)
                .field("host_override", host_override)
                .field("name_override", name_override)
                .field("ssl_mode", ssl_mode)
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
        Ok(DatabaseSource::Secret { arn, host_override: var(HOST_VAR), name_override: var(NAME_VAR), ssl_mode })
    }

    /// The connect options: the URL parsed, or the secret fetched through `fetcher` and parsed.
    pub async fn connect_options(&self, fetcher: &dyn SecretFetcher) -> Result<ConnectOptions, Error> {
        match self {
            DatabaseSource::Url(url) => options_from_url(url),
            DatabaseSource::Secret { arn, host_override, name_override, ssl_mode } => {
                let secret = fetcher.fetch(arn).await?;
                options_from_secret(arn, &secret, host_override.as_deref(), name_override.as_deref(), *ssl_mode)
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
pub struct ConnectOptions(PgConnectOptions);

impl ConnectOptions {
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

/// Parses an RDS-style JSON secret into connect options. `host_override` and
/// `name_override` replace the secret's `host` and `dbname`.
pub fn options_from_secret(
    arn: &str,
    secret: &str,
    host_override: Option<&str>,
    name_override: Option<&str>,
    ssl_mode: PgSslMode,
) -> Result<ConnectOptions, Error> {
    let arn = || arn.to_owned();
    // Parsed as a `Value` first: syntax errors quote nothing, type errors could.
    let value: Value =
        serde_json::from_str(secret).map_err(|e| Error::NotJson { arn: arn(), line: e.line(), column: e.column() })?;
    let Value::Object(fields) = value else {
        return Err(Error::NotAnObject { arn: arn() });
    };
    let text = |field: &'static str| -> Result<Option<&str>, Error> {
        match fields.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.trim().is_empty() && field != "password" => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(_) => Err(Error::InvalidField { arn: arn(), field, expected: "a string" }),
        }
    };
    let missing = |field: &'static str, hint: &'static str| Error::MissingField { arn: arn(), field, hint };

    if let Some(engine) = text("engine")?
        && !engine.to_ascii_lowercase().contains("postgres")
    {
        return Err(Error::InvalidField { arn: arn(), field: "engine", expected: "a PostgreSQL engine" });
    }
    let username = text("username")?.ok_or_else(|| missing("username", ""))?;
    let password = text("password")?.ok_or_else(|| missing("password", ""))?;
    let host = match host_override.map(str::trim).filter(|h| !h.is_empty()) {
        Some(host) => host,
        None => text("host")?.ok_or_else(|| missing("host", " (or set RARA_DATABASE_HOST)"))?,
    };
    let port =
        match fields.get("port") {
            None | Some(Value::Null) => DEFAULT_PORT,
            Some(Value::Number(n)) => {
                n.as_u64().and_then(|p| u16::try_from(p).ok()).filter(|p| *p > 0).ok_or_else(|| {
                    Error::InvalidField { arn: arn(), field: "port", expected: "a port number (1-65535)" }
                })?
            }
            Some(Value::String(s)) => s.trim().parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
                Error::InvalidField { arn: arn(), field: "port", expected: "a port number (1-65535)" }
            })?,
            Some(_) => {
                return Err(Error::InvalidField { arn: arn(), field: "port", expected: "a port number (1-65535)" });
            }
        };
    let database = match name_override.map(str::trim).filter(|n| !n.is_empty()) {
        Some(name) => Some(name),
        None => text("dbname")?,
    };

    let mut options = PgConnectOptions::new_without_pgpass()
        .host(host)
        .port(port)
        .username(username)
        .password(password)
        .ssl_mode(ssl_mode);
    if let Some(database) = database {
        options = options.database(database);
    }
    Ok(ConnectOptions(options))
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
        Self::new(aws_sdk_secretsmanager::Client::new(config))
    }
}

#[async_trait::async_trait]
impl SecretFetcher for SecretsManager {
    async fn fetch(&self, arn: &str) -> Result<String, Error> {
        let output = self
            .client
            .get_secret_value()
            .secret_id(arn)
            .send()
            .await
            .map_err(|e| Error::Fetch { arn: arn.to_owned(), source: Box::new(e) })?;
        output.secret_string().map(str::to_owned).ok_or_else(|| Error::NotText { arn: arn.to_owned() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const ARN: &str = "arn:aws:secretsmanager:us-east-1:123456789012:secret:rara-db-AbCdEf";
    const PASSWORD: &str = "s3cr3t-hunter2";

    fn parse(secret: &str) -> Result<ConnectOptions, Error> {
        options_from_secret(ARN, secret, None, None, DEFAULT_SECRET_SSL_MODE)
    }

    fn rds_secret() -> String {
        serde_json::json!({
            "engine": "postgres", "username": "rara", "password": PASSWORD,
            "host": "db.example.internal", "port": 6432, "dbname": "rara_prod",
            "dbInstanceIdentifier": "rara-db"
        })
        .to_string()
    }

    fn source(vars: &[(&str, &str)]) -> Result<DatabaseSource, config::Error> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let core = Config::from_lookup("test", |k| map.get(k).cloned())?;
        DatabaseSource::from_lookup(&core, |k| map.get(k).cloned())
    }

    #[test]
    fn an_rds_secret_becomes_connect_options_with_tls_required() {
        let options = parse(&rds_secret()).unwrap().into_inner();
        assert_eq!(options.get_host(), "db.example.internal");
        assert_eq!(options.get_port(), 6432);
        assert_eq!(options.get_username(), "rara");
        assert_eq!(options.get_database(), Some("rara_prod"));
        assert!(matches!(options.get_ssl_mode(), PgSslMode::Require));
    }

    #[test]
    fn port_defaults_to_5432_and_may_be_a_string() {
        let base = serde_json::json!({"username": "u", "password": "p", "host": "h"});
        assert_eq!(parse(&base.to_string()).unwrap().get().get_port(), DEFAULT_PORT);
        let mut quoted = base.clone();
        quoted["port"] = "5433".into();
        assert_eq!(parse(&quoted.to_string()).unwrap().get().get_port(), 5433);
        let mut bad = base;
        bad["port"] = PASSWORD.into();
        let err = parse(&bad.to_string()).unwrap_err().to_string();
        assert!(err.contains("`port`") && !err.contains(PASSWORD), "{err}");
    }

    #[test]
    fn overrides_replace_host_and_dbname() {
        let options =
            options_from_secret(ARN, &rds_secret(), Some("proxy.example"), Some("other"), PgSslMode::VerifyFull)
                .unwrap()
                .into_inner();
        assert_eq!(options.get_host(), "proxy.example");
        assert_eq!(options.get_database(), Some("other"));
        assert!(matches!(options.get_ssl_mode(), PgSslMode::VerifyFull));
    }

    #[test]
    fn a_host_override_makes_the_secrets_host_optional() {
        let secret = serde_json::json!({"username": "u", "password": PASSWORD}).to_string();
        let err = parse(&secret).unwrap_err().to_string();
        assert!(err.contains("no `host`") && err.contains("RARA_DATABASE_HOST"), "{err}");
        let options = options_from_secret(ARN, &secret, Some("proxy"), None, DEFAULT_SECRET_SSL_MODE).unwrap();
        assert_eq!(options.get().get_host(), "proxy");
        assert_eq!(options.get().get_database(), None);
    }

    #[test]
    fn missing_fields_are_named() {
        for field in ["username", "password"] {
            let mut secret = serde_json::from_str::<Value>(&rds_secret()).unwrap();
            secret.as_object_mut().unwrap().remove(field);
            let err = parse(&secret.to_string()).unwrap_err();
            assert!(matches!(err, Error::MissingField { field: f, .. } if f == field), "{err}");
            assert!(err.to_string().contains(&format!("no `{field}`")), "{err}");
        }
    }

    #[test]
    fn errors_never_quote_the_secret() {
        let not_json = format!("username=rara password={PASSWORD}");
        let not_object = serde_json::to_string(PASSWORD).unwrap();
        let wrong_type = serde_json::json!({"username": "u", "password": [PASSWORD], "host": "h"}).to_string();
        let other_engine = serde_json::json!({"engine": PASSWORD, "username": "u", "password": "p"}).to_string();
        for secret in [not_json.as_str(), &not_object, &wrong_type, &other_engine, "{\"password\": \"s3cr3t"] {
            let err = parse(secret).unwrap_err();
            for shown in [err.to_string(), format!("{err:?}")] {
                assert!(!shown.contains(PASSWORD) && !shown.contains("s3cr3t"), "{shown}");
            }
        }
        assert!(matches!(parse(&not_json), Err(Error::NotJson { line: 1, column: 1, .. })));
        assert!(matches!(parse(&not_object), Err(Error::NotAnObject { .. })));
    }

    #[test]
    fn debug_of_connect_options_and_source_redacts_the_password() {
        let options = parse(&rds_secret()).unwrap();
        let shown = format!("{options:?}");
        assert!(!shown.contains(PASSWORD) && shown.contains("db.example.internal"), "{shown}");
        let url = source(&[("DATABASE_URL", &format!("postgres://u:{PASSWORD}@db/x"))]).unwrap();
        assert!(!format!("{url:?}").contains(PASSWORD));
        assert!(
            !format!("{:?}", options_from_url(&format!("postgres://u:{PASSWORD}@db/x")).unwrap()).contains(PASSWORD)
        );
    }

    #[test]
    fn the_secret_is_used_only_when_its_arn_is_set() {
        assert!(matches!(source(&[]).unwrap(), DatabaseSource::Url(url) if url == config::DEFAULT_DATABASE_URL));
        assert!(matches!(source(&[(SECRET_ARN_VAR, " ")]).unwrap(), DatabaseSource::Url(_)));
        let secret = source(&[(SECRET_ARN_VAR, ARN), (HOST_VAR, ""), (NAME_VAR, "rara"), (SSL_MODE_VAR, "")]);
        let DatabaseSource::Secret { arn, host_override, name_override, ssl_mode } = secret.unwrap() else {
            panic!("expected the secret");
        };
        assert_eq!((arn.as_str(), host_override, name_override.as_deref()), (ARN, None, Some("rara")));
        assert!(matches!(ssl_mode, PgSslMode::Require));
    }

    #[test]
    fn ssl_mode_is_validated() {
        for (raw, expected) in [("disable", "Disable"), ("Prefer", "Prefer"), ("verify-full", "VerifyFull")] {
            let found = source(&[(SECRET_ARN_VAR, ARN), (SSL_MODE_VAR, raw)]).unwrap();
            assert!(format!("{found:?}").contains(&format!("ssl_mode: {expected}")), "{found:?}");
        }
        let err = source(&[(SECRET_ARN_VAR, ARN), (SSL_MODE_VAR, "on")]).unwrap_err().to_string();
        assert!(err.starts_with("RARA_DATABASE_SSL_MODE=\"on\" is not valid"), "{err}");
    }
}
