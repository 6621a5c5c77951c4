//! The RDS-style JSON secret (`username`, `password`, `host`, `port`, `dbname`, maybe
//! `engine`) read into connect options, quoting nothing of it in an error.

use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgSslMode};

use super::{ConnectOptions, DEFAULT_PORT, Error};

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

impl super::DatabaseSource {
    /// The database secret's ARN when the credentials come from one: a workflow's secrets
    /// prefix must not cover it (`crate::secrets::check_start`).
    pub fn secret_arn(&self) -> Option<&str> {
        match self {
            super::DatabaseSource::Secret { arn, .. } => Some(arn),
            super::DatabaseSource::Url(_) => None,
        }
    }
}
