//! The secret resolvers of `RARA_SECRETS_BACKEND`, behind the core's port
//! ([`SecretResolver`]):
//! - [`EnvSecretResolver`] (`env`, the default): `RARA_SECRET_<NAME>` (the name upper-cased,
//!   every character but a letter or a digit as `_`), read once at start, else the file
//!   `RARA_SECRETS_DIR/<name>` read at each use (mounted secrets may rotate);
//! - [`SecretsManagerResolver`] (`secretsmanager`): AWS Secrets Manager, `RARA_SECRETS_PREFIX`
//!   (required, not empty) followed by the name as the secret id, values cached for
//!   [`SECRETS_MANAGER_CACHE_TTL`]. A name holding `:` or starting with `/` is refused: an ARN
//!   is never a name, and nothing outside the prefix resolves.
//!
//! Which workflows may resolve which names is the grants' business (`rara_store::grants`,
//! checked before any backend is asked). [`check_start`] refuses a Secrets Manager backend
//! without a prefix, or whose prefix covers the database secret.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use rara_runtime::secrets::{Error, SecretResolver};
use rara_runtime::settings::SecretsBackend;
use tokio::time::Instant;

/// The prefix of the environment variables holding secrets.
pub const ENV_PREFIX: &str = "RARA_SECRET_";
/// The directory holding one file per secret.
pub const DIR_VAR: &str = "RARA_SECRETS_DIR";
/// How long a Secrets Manager value is reused before it is fetched again.
pub const SECRETS_MANAGER_CACHE_TTL: Duration = Duration::from_secs(300);

/// `RARA_SECRET_<NAME>`, else the file `RARA_SECRETS_DIR/<name>`.
#[derive(Clone, Default)]
pub struct EnvSecretResolver {
    vars: HashMap<String, String>,
    dir: Option<PathBuf>,
}

impl std::fmt::Debug for EnvSecretResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvSecretResolver").field("vars", &self.vars.len()).field("dir", &self.dir).finish()
    }
}

impl EnvSecretResolver {
    /// Reads the process environment once.
    pub fn from_env() -> Self {
        Self::from_lookup(std::env::vars(), std::env::var_os(DIR_VAR).map(PathBuf::from))
    }

    /// From explicit variables (only those starting with [`ENV_PREFIX`] are kept) and directory.
    pub fn from_lookup(vars: impl IntoIterator<Item = (String, String)>, dir: Option<PathBuf>) -> Self {
        let vars = vars.into_iter().filter(|(k, _)| k.starts_with(ENV_PREFIX)).collect();
        EnvSecretResolver { vars, dir }
    }

    /// The variable holding `name`: `api-key` → `RARA_SECRET_API_KEY`.
    pub fn var_name(name: &str) -> String {
        let mut var = String::from(ENV_PREFIX);
        var.extend(name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }));
        var
    }
}

#[async_trait::async_trait]
impl SecretResolver for EnvSecretResolver {
    async fn resolve(&self, name: &str) -> Result<String, Error> {
        if let Some(value) = self.vars.get(&Self::var_name(name)) {
            return Ok(value.clone());
        }
        let Some(dir) = &self.dir else { return Err(Error::NotFound { name: name.to_owned() }) };
        if name.contains(['/', '\\', '\0']) || name.starts_with('.') {
            return Err(Error::InvalidName {
                name: name.to_owned(),
                reason: "a file name under RARA_SECRETS_DIR may not hold a path separator or start with a dot",
            });
        }
        match tokio::fs::read(dir.join(name)).await {
            Ok(bytes) => {
                let text = String::from_utf8(bytes).map_err(|_| Error::NotText { name: name.to_owned() })?;
                // A file written by `echo` ends with a newline that is not part of the secret.
                let text = text.strip_suffix('\n').map(|t| t.strip_suffix('\r').unwrap_or(t)).unwrap_or(&text);
                Ok(text.to_owned())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::NotFound { name: name.to_owned() }),
            Err(e) => Err(Error::Unavailable { name: name.to_owned(), message: e.kind().to_string() }),
        }
    }
}

/// Why a function refuses to start with its secrets backend. No variant holds a secret.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(
        "RARA_SECRETS_BACKEND=secretsmanager needs RARA_SECRETS_PREFIX (e.g. `rara/workflows/`): without one, \
         a workflow could name any secret the executor's role can read"
    )]
    NoPrefix,
    #[error(
        "RARA_SECRETS_PREFIX {prefix:?} covers the database secret {database:?}: a workflow could resolve the \
         database credentials; choose a prefix the database secret's name does not start with"
    )]
    PrefixCoversDatabase { prefix: String, database: String },
}

/// The start check of the secrets backend: Secrets Manager needs a non-empty prefix, and the
/// database secret (`database_secret`: a name or an ARN, `RARA_DATABASE_SECRET_ARN`) must not
/// fall under it.
pub fn check_start(backend: SecretsBackend, prefix: &str, database_secret: Option<&str>) -> Result<(), StartError> {
    if backend != SecretsBackend::SecretsManager {
        return Ok(());
    }
    if prefix.is_empty() {
        return Err(StartError::NoPrefix);
    }
    if let Some(database) = database_secret
        && secret_names(database).iter().any(|name| name.starts_with(prefix))
    {
        return Err(StartError::PrefixCoversDatabase { prefix: prefix.to_owned(), database: database.to_owned() });
    }
    Ok(())
}

/// The names a secret id may stand for: an ARN's part after `secret:`, with and without the
/// six-character suffix Secrets Manager appends (`-AbCdEf`); anything else as it is.
fn secret_names(id: &str) -> Vec<&str> {
    let Some((_, name)) = id.split_once(":secret:").filter(|_| id.starts_with("arn:")) else { return vec![id] };
    let suffixed = name.len() > 7
        && name.as_bytes()[name.len() - 7] == b'-'
        && name[name.len() - 6..].bytes().all(|b| b.is_ascii_alphanumeric());
    if suffixed { vec![name, &name[..name.len() - 7]] } else { vec![name] }
}

/// AWS Secrets Manager: the secret id is `prefix + name`, the prefix required and the name
/// never an ARN nor an absolute path. Text secrets only.
pub struct SecretsManagerResolver {
    client: aws_sdk_secretsmanager::Client,
    prefix: String,
    cache: Mutex<HashMap<String, (Instant, String)>>,
}

impl std::fmt::Debug for SecretsManagerResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretsManagerResolver").field("prefix", &self.prefix).finish_non_exhaustive()
    }
}

impl SecretsManagerResolver {
    /// Refuses an empty prefix ([`StartError::NoPrefix`]).
    pub fn new(client: aws_sdk_secretsmanager::Client, prefix: impl Into<String>) -> Result<Self, StartError> {
        let prefix = prefix.into();
        if prefix.is_empty() {
            return Err(StartError::NoPrefix);
        }
        crate::call_log::workflow_secrets_prefix(&prefix);
        Ok(SecretsManagerResolver { client, prefix, cache: Mutex::new(HashMap::new()) })
    }

    fn cached(&self, id: &str) -> Option<String> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.get(id).filter(|(at, _)| at.elapsed() < SECRETS_MANAGER_CACHE_TTL).map(|(_, v)| v.clone())
    }
}

#[async_trait::async_trait]
impl SecretResolver for SecretsManagerResolver {
    async fn resolve(&self, name: &str) -> Result<String, Error> {
        if name.contains(':') || name.starts_with('/') {
            return Err(Error::InvalidName {
                name: name.to_owned(),
                reason: "a Secrets Manager name may not hold `:` or start with `/` (an ARN is never a name): \
                         it is read under RARA_SECRETS_PREFIX",
            });
        }
        let id = format!("{}{name}", self.prefix);
        if let Some(value) = self.cached(&id) {
            return Ok(value);
        }
        let output = self.client.get_secret_value().secret_id(&id).send().await.map_err(|e| {
            if e.as_service_error().is_some_and(|s| s.is_resource_not_found_exception()) {
                Error::NotFound { name: name.to_owned() }
            } else {
                let message = aws_sdk_secretsmanager::error::DisplayErrorContext(&e).to_string();
                Error::Unavailable { name: name.to_owned(), message }
            }
        })?;
        let value = output.secret_string.ok_or_else(|| Error::NotText { name: name.to_owned() })?;
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.insert(id, (Instant::now(), value.clone()));
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn files_under_the_secrets_dir_are_read_without_their_last_newline() {
        let dir = std::env::temp_dir().join(format!("rara-secrets-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("db"), "pw\n").unwrap();
        let resolver = EnvSecretResolver::from_lookup([], Some(dir.clone()));
        assert_eq!(resolver.resolve("db").await.unwrap(), "pw");
        assert!(matches!(resolver.resolve("nope").await, Err(Error::NotFound { .. })));
        assert!(matches!(resolver.resolve("../etc/passwd").await, Err(Error::InvalidName { .. })));
        std::fs::remove_dir_all(dir).unwrap();
    }

    const DB_ARN: &str = "arn:aws:secretsmanager:us-east-1:123456789012:secret:rara/database-AbCdEf";

    #[test]
    fn secrets_manager_refuses_to_start_without_a_prefix_or_when_it_covers_the_database_secret() {
        let sm = SecretsBackend::SecretsManager;
        assert!(matches!(check_start(sm, "", None), Err(StartError::NoPrefix)));
        for prefix in ["rara/", "rara/data", "rara/database", "r"] {
            let refused = check_start(sm, prefix, Some(DB_ARN));
            assert!(matches!(refused, Err(StartError::PrefixCoversDatabase { .. })), "{prefix}: {refused:?}");
        }
        assert!(matches!(
            check_start(sm, "rara/", Some("rara/database")),
            Err(StartError::PrefixCoversDatabase { .. })
        ));
        assert!(check_start(sm, "rara/workflows/", Some(DB_ARN)).is_ok());
        assert!(check_start(sm, "rara/database-AbCdEf-x", Some(DB_ARN)).is_ok());
        assert!(check_start(sm, "wf/", None).is_ok());
        assert!(check_start(SecretsBackend::Env, "", Some(DB_ARN)).is_ok(), "the env backend needs no prefix");
    }

    #[test]
    fn an_arn_names_its_secret_with_and_without_the_suffix() {
        assert_eq!(secret_names(DB_ARN), vec!["rara/database-AbCdEf", "rara/database"]);
        assert_eq!(secret_names("arn:aws:secretsmanager:us-east-1:1:secret:db"), vec!["db"]);
        assert_eq!(secret_names("rara/db"), vec!["rara/db"]);
    }
}
