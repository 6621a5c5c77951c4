//! What a function builds once, at start (the Lambda init phase): settings, the Postgres
//! pool (credentials from `DATABASE_URL` or, deployed, the Secrets Manager secret of
//! `RARA_DATABASE_SECRET_ARN`, fetched here once), the SQS client and the executor
//! registry. Nothing here runs per invocation.

use std::sync::Arc;

use rara_queue::sqs::SqsQueue;
use rara_runtime::executor::BatchExecutor;
use rara_runtime::registry::standard_registry;
use rara_runtime::scheduler::Scheduler;
use rara_runtime::settings::{SecretsBackend, Settings};
use rara_store::Store;

use crate::aws::AwsConfig;
use crate::database::DatabaseSource;
use crate::secrets::{EnvSecretResolver, SecretsManagerResolver};

/// The message attribute carrying the W3C trace context.
pub const TRACEPARENT: &str = rara_queue::sqs::TRACEPARENT;
/// The message attribute naming the operations of the message's steps.
pub const OPERATIONS: &str = rara_queue::operations::OPERATIONS;
/// Postgres connections per container: one for the work, one for heartbeats alongside.
pub const POOL_CONNECTIONS: u32 = 2;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] rara_domain::config::Error),
    #[error(transparent)]
    Database(#[from] crate::database::Error),
    #[error(transparent)]
    Connect(#[from] crate::database::ConnectError),
    #[error("cannot connect to Postgres: {0}")]
    Store(#[from] rara_store::Error),
    #[error(transparent)]
    Registry(#[from] rara_runtime::registry::Error),
    #[error(transparent)]
    Secrets(#[from] crate::secrets::StartError),
    #[error(transparent)]
    Artifacts(#[from] rara_artifacts::Error),
    #[error("the remote executors' credentials: {0}")]
    RemoteCredentials(String),
}

/// JSON logs on stderr (level from `AWS_LAMBDA_LOG_LEVEL`, else `RARA_LOG`, else `info`) and,
/// when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, spans exported over OTLP as `service`
/// ([`crate::telemetry`]). Step inputs and outputs are never logged; a step's lines carry run
/// id, step id, attempt, fence, operation and the run's trace id. Call it inside the runtime.
pub fn init_logging(service: &str) -> Result<(), crate::telemetry::Error> {
    crate::telemetry::init(service, &crate::telemetry::Config::from_env()?)
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
        Self::connect_sessions(settings, &database, Sessions::of(role)).await
    }

    /// Connects with `settings` to the database the environment names: the secret of
    /// `RARA_DATABASE_SECRET_ARN` when set, else `settings`' `DATABASE_URL`.
    pub async fn connect(settings: Settings) -> Result<Self, Error> {
        let database = DatabaseSource::from_lookup(&settings.core, |k| std::env::var(k).ok())?;
        Self::connect_to(settings, &database).await
    }

    /// Connects to `database`; a secret is fetched here, once, through a Secrets Manager
    /// client of the SDK environment. Every client gets the deadlines of
    /// `settings.timeouts` (through `connect_store`).
    pub async fn connect_to(settings: Settings, database: &DatabaseSource) -> Result<Self, Error> {
        Self::connect_sessions(settings, database, Sessions::Shared).await
    }

    async fn connect_sessions(
        mut settings: Settings,
        database: &DatabaseSource,
        sessions: Sessions,
    ) -> Result<Self, Error> {
        crate::secrets::check_start(settings.secrets_backend, &settings.secrets_prefix, database.secret_arn())?;
        let aws = settings.timeouts.aws_config().await;
        let store = connect_store(&settings, database, &aws, sessions).await?;
        if let Some(arn) = settings.remote_credentials_secret.clone() {
            remote_credentials(&mut settings, &arn, &aws).await?;
        }
        // For the IAM check: this function's queues are the template's (a no-op unless recording).
        crate::call_log::stands_for(&settings.queue_url, "GetAtt:StepQueue.Arn");
        if let Some(dlq) = &settings.dlq_url {
            crate::call_log::stands_for(dlq, "GetAtt:DeadLetterQueue.Arn");
        }
        let queue =
            Arc::new(SqsQueue::new(crate::aws::sqs_client(&aws), settings.queue_url.clone(), settings.dlq_url.clone()));
        tracing::info!(worker = %settings.core.worker_id, "wired");
        Ok(Wiring { settings: Arc::new(settings), store, queue, aws })
    }

    /// The artifact store of `RARA_ARTIFACTS_URI`, if set ([`artifact_store`]).
    pub fn artifacts(&self) -> Result<Option<Arc<dyn rara_artifacts::ArtifactStore>>, Error> {
        artifact_store(&self.settings, &self.aws)
    }

    /// The scheduler; with `RARA_ARTIFACTS_URI`, pruning deletes the runs' objects too.
    pub fn scheduler(&self) -> Result<Scheduler, Error> {
        let scheduler = Scheduler::new(self.store.clone(), self.queue.clone(), self.settings.clone());
        Ok(match self.artifacts()? {
            Some(store) => scheduler.with_artifacts(store),
            None => scheduler,
        })
    }

    /// The executor's batch processor with the standard registry and the secret resolver
    /// of `RARA_SECRETS_BACKEND`.
    pub async fn batch_executor(&self) -> Result<BatchExecutor, Error> {
        let registry = standard_registry(&self.settings).await?;
        tracing::info!(egress = %self.settings.egress, "http.request may reach");
        let mut executor =
            BatchExecutor::new(self.store.clone(), self.queue.clone(), Arc::new(registry), &self.settings);
        if let Some(store) = self.artifacts()? {
            executor = executor.with_artifacts(store, &self.settings);
        }
        Ok(match self.settings.secrets_backend {
            SecretsBackend::Env => executor.with_secrets(Arc::new(EnvSecretResolver::from_env())),
            SecretsBackend::SecretsManager => {
                let client = crate::aws::secrets_manager_client(&self.aws);
                executor
                    .with_secrets(Arc::new(SecretsManagerResolver::new(client, self.settings.secrets_prefix.clone())?))
            }
        })
    }
}

/// The artifact store of `RARA_ARTIFACTS_URI` (an S3 client of `aws` for `s3://`), if set.
pub fn artifact_store(
    settings: &Settings,
    aws: &aws_config::SdkConfig,
) -> Result<Option<Arc<dyn rara_artifacts::ArtifactStore>>, Error> {
    let Some(uri) = &settings.artifacts_uri else { return Ok(None) };
    Ok(Some(crate::aws::open_artifacts(uri, || crate::aws::s3_client(aws))?))
}

/// Puts the token and attempt key of the secret `arn` (`RARA_REMOTE_CREDENTIALS_SECRET_ARN`),
/// fetched once, into `settings`' remote executors' security.
async fn remote_credentials(settings: &mut Settings, arn: &str, aws: &aws_config::SdkConfig) -> Result<(), Error> {
    let client = crate::aws::secrets_manager_client(aws);
    let text = crate::aws::secret_text(&client, arn, "Ref:RemoteCredentialsSecretArn")
        .await
        .map_err(|e| Error::RemoteCredentials(e.to_string()))?;
    let security = settings.remote_security.clone().with_credentials_json(&text);
    settings.remote_security = security.map_err(|e| Error::RemoteCredentials(format!("{arn}: {e}")))?;
    Ok(())
}

/// The Postgres side of a function alone, for one that sends nothing to SQS (the API):
/// settings read once and the store connected as [`Wiring::from_env`] connects it, without
/// an SQS client; the remote executors' credentials fetched as the executor fetches them (the
/// API's cancel tells detached attempts to stop). `role` names the worker.
pub async fn store_from_env(role: &str) -> Result<(Arc<Settings>, Store), Error> {
    let env = |k: &str| std::env::var(k).ok();
    let mut settings = Settings::from_lookup(role, env)?;
    let database = DatabaseSource::from_lookup(&settings.core, env)?;
    crate::secrets::check_start(settings.secrets_backend, &settings.secrets_prefix, database.secret_arn())?;
    let aws = settings.timeouts.aws_config().await;
    let store = connect_store(&settings, &database, &aws, Sessions::of(role)).await?;
    if let Some(arn) = settings.remote_credentials_secret.clone() {
        remote_credentials(&mut settings, &arn, &aws).await?;
    }
    tracing::info!(worker = %settings.core.worker_id, "wired");
    Ok((Arc::new(settings), store))
}

/// How a function's sessions plan their statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sessions {
    /// The executor function's: generic plans always ([`rara_store::executor_session`]).
    Executor,
    /// As Postgres chooses: the scheduler's, the API's, and `rara dev`'s one pool for both.
    Shared,
}

impl Sessions {
    fn of(role: &str) -> Self {
        if role == "executor" { Sessions::Executor } else { Sessions::Shared }
    }
}

/// The pool of a function: [`POOL_CONNECTIONS`] connections to `database` (a secret fetched
/// once with `aws`), each session with rara's `statement_timeout` and
/// `idle_in_transaction_session_timeout`, and the plans of `sessions`.
async fn connect_store(
    settings: &Settings,
    database: &DatabaseSource,
    aws: &aws_config::SdkConfig,
    sessions: Sessions,
) -> Result<Store, Error> {
    let timeouts = settings.timeouts;
    let options = database.connect_options_from_env(aws).await?;
    let failed = |e| options.connect_error(e);
    let connect = options.get().clone().options([
        ("statement_timeout", timeouts.db_statement.as_millis().to_string()),
        ("idle_in_transaction_session_timeout", timeouts.db_idle_in_transaction.as_millis().to_string()),
    ]);
    let connect = match sessions {
        Sessions::Executor => rara_store::executor_session(connect),
        Sessions::Shared => connect,
    };
    // A call given up client-side (`timeouts::db_call`) leaves its connection waiting for
    // an answer that may never come, and sqlx's own check of a released connection would
    // wait for it forever, holding a pool slot (sqlx issue #4349). Check first, bounded: a
    // connection that does not answer within the connect timeout is an error here, so
    // sqlx drops it without the graceful close (which could wait on it too).
    let release_check = timeouts.db_connect;
    let pool = rara_store::pool_options()
        .max_connections(POOL_CONNECTIONS)
        .acquire_timeout(timeouts.db_connect)
        .after_release(move |connection, _| {
            Box::pin(async move {
                use sqlx::Connection;
                match tokio::time::timeout(release_check, connection.ping()).await {
                    Ok(pinged) => pinged.map(|()| true),
                    Err(_) => Err(sqlx::Error::PoolTimedOut),
                }
            })
        })
        .connect_with(connect)
        .await
        .map_err(failed)?;
    Ok(Store::new(pool))
}
