//! What a function builds once, at start (the Lambda init phase): settings, the Postgres
//! pool (credentials from `DATABASE_URL` or, deployed, the Secrets Manager secret of
//! `RARA_DATABASE_SECRET_ARN`, fetched here once), the SQS client and the executor
//! registry. Nothing here runs per invocation.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rara_builtins::BuiltinsConfig;
use rara_domain::registry::Registry;
use rara_queue::sqs::SqsQueue;
use rara_remote::RemoteExecutors;
use rara_store::Store;

use crate::batch::BatchExecutor;
use crate::database::DatabaseSource;
use crate::scheduler::Scheduler;
use crate::secrets::SecretsManagerResolver;
use crate::settings::{SecretsBackend, Settings};

/// The message attribute carrying the W3C trace context.
pub const TRACEPARENT: &str = rara_queue::sqs::TRACEPARENT;
/// Postgres connections per container: one for the work, one for heartbeats alongside.
pub const POOL_CONNECTIONS: u32 = 2;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] rara_domain::config::Error),
    #[error(transparent)]
    Database(#[from] crate::database::Error),
    #[error("cannot connect to Postgres: {0}")]
    Store(#[from] rara_store::Error),
    #[error("cannot register the built-in executors: {0}")]
    Builtins(#[from] rara_builtins::Error),
    #[error("RARA_REMOTE_EXECUTORS is not valid: {0}")]
    Remote(#[from] rara_remote::router::Error),
}

/// JSON logs on stderr, filtered by `RARA_LOG` (default `info`). Step inputs and outputs
/// are never logged; a step's lines carry run id, step id, attempt, fence and operation.
pub fn init_logging() {
    let filter = std::env::var("RARA_LOG")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .and_then(|s| tracing_subscriber::EnvFilter::try_new(s).ok())
        .unwrap_or_else(|| "info".into());
    let _ = tracing_subscriber::fmt()
        .json()
        .with_current_span(true)
        .with_span_list(false)
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Time left until a Lambda deadline (milliseconds since the epoch).
pub fn remaining(deadline_ms: u64) -> Duration {
    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
    Duration::from_millis(deadline_ms.saturating_sub(now_ms))
}

/// The long-lived parts of a function.
#[derive(Debug, Clone)]
pub struct Wiring {
    pub settings: Arc<Settings>,
    pub store: Store,
    pub queue: Arc<SqsQueue>,
    /// The AWS SDK configuration every client of this function is built from.
    pub aws: aws_config::SdkConfig,
}

impl Wiring {
    /// Reads the environment once and connects. `role` names the worker (`scheduler`, `executor`).
    pub async fn from_env(role: &str) -> Result<Self, Error> {
        let env = |k: &str| std::env::var(k).ok();
        let settings = Settings::from_lookup(role, env)?;
        let database = DatabaseSource::from_lookup(&settings.core, env)?;
        Self::connect_to(settings, &database).await
    }

    /// Connects with `settings` to the database the environment names: the secret of
    /// `RARA_DATABASE_SECRET_ARN` when set, else `settings`' `DATABASE_URL`.
    pub async fn connect(settings: Settings) -> Result<Self, Error> {
        let database = DatabaseSource::from_lookup(&settings.core, |k| std::env::var(k).ok())?;
        Self::connect_to(settings, &database).await
    }

    /// Connects to `database`; a secret is fetched here, once, through a Secrets Manager
    /// client of the SDK environment. Every client gets the deadlines of
    /// `settings.timeouts`; rara's Postgres sessions get `statement_timeout` and
    /// `idle_in_transaction_session_timeout`.
    pub async fn connect_to(settings: Settings, database: &DatabaseSource) -> Result<Self, Error> {
        let timeouts = settings.timeouts;
        let aws = timeouts.aws_config().await;
        let options = database.connect_options_from_env(&aws).await?.into_inner().options([
            ("statement_timeout", timeouts.db_statement.as_millis().to_string()),
            ("idle_in_transaction_session_timeout", timeouts.db_idle_in_transaction.as_millis().to_string()),
        ]);
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(POOL_CONNECTIONS)
            .acquire_timeout(timeouts.db_connect)
            .connect_with(options)
            .await
            .map_err(rara_store::Error::from)?;
        let store = Store::new(pool);
        let queue = Arc::new(SqsQueue::new(
            aws_sdk_sqs::Client::new(&aws),
            settings.queue_url.clone(),
            settings.dlq_url.clone(),
        ));
        tracing::info!(worker = %settings.core.worker_id, "wired");
        Ok(Wiring { settings: Arc::new(settings), store, queue, aws })
    }

    pub fn scheduler(&self) -> Scheduler {
        Scheduler::new(self.store.clone(), self.queue.clone(), self.settings.clone())
    }

    /// The executor's batch processor with the standard registry and the secret resolver
    /// of `RARA_SECRETS_BACKEND`.
    pub async fn batch_executor(&self) -> Result<BatchExecutor, Error> {
        let registry = standard_registry(&self.settings).await?;
        let executor = BatchExecutor::new(self.store.clone(), self.queue.clone(), Arc::new(registry), &self.settings);
        Ok(match self.settings.secrets_backend {
            SecretsBackend::Env => executor,
            SecretsBackend::SecretsManager => {
                let client = aws_sdk_secretsmanager::Client::new(&self.aws);
                executor
                    .with_secrets(Arc::new(SecretsManagerResolver::new(client, self.settings.secrets_prefix.clone())))
            }
        })
    }
}

/// The built-in executors (`noop`, `sleep`, `fail`, `http.request`) alone: what routing runs
/// in-process (submit checks that such steps fit one invocation).
pub fn builtin_registry() -> Result<Registry, Error> {
    let mut registry = Registry::new();
    rara_builtins::register_builtins(&mut registry, &BuiltinsConfig::default())?;
    Ok(registry)
}

/// The built-in executors (`noop`, `sleep`, `fail`, `http.request`) plus the remote
/// executors of `RARA_REMOTE_EXECUTORS` for every other operation. Remote capabilities are
/// discovered here, during init (the first connection is paid once per container).
pub async fn standard_registry(settings: &Settings) -> Result<Registry, Error> {
    let mut registry = builtin_registry()?;
    if let Some(endpoints) = &settings.remote_executors {
        let remote = Arc::new(RemoteExecutors::from_config_value_with(endpoints, settings.timeouts.grpc)?);
        remote.refresh().await;
        registry.with_remote(remote);
    }
    Ok(registry)
}
