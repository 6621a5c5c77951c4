//! One module per command, each with its arguments (`#[derive(Args)]`) and a `run` function;
//! here what several of them share: the configuration, the store connection, the stop
//! signal of the runners and their summary line.

pub mod artifact;
pub mod cancel;
pub mod capabilities;
pub mod dev;
pub mod dlq;
pub mod executor;
pub mod exit_codes;
pub mod limits;
pub mod list;
pub mod migrate;
pub mod pause;
pub mod prune;
pub mod queue;
pub mod replay;
pub mod rerun;
pub mod retry;
pub mod schedule;
pub mod scheduler;
pub mod secrets;
pub mod signal;
pub mod status;
pub mod submit;
pub mod trace;
pub mod ui;
pub mod watch;
pub mod workflow;

use anyhow::Context;
use rara_domain::config::Config;
use rara_runtime::metrics::Counters;
use rara_store::Store;
use tokio_util::sync::CancellationToken;

use crate::Failure;
use crate::exit::ExitCode;

/// The configuration of the commands over the store, from the environment.
pub fn config() -> Result<Config, Failure> {
    Ok(Config::from_lookup("cli", |k| std::env::var(k).ok())?)
}

/// `RARA_INLINE_OUTPUT_BYTES`: the largest output or run inputs kept inline.
pub fn inline_bytes() -> Result<usize, Failure> {
    match std::env::var("RARA_INLINE_OUTPUT_BYTES") {
        Ok(text) => Ok(text
            .trim()
            .parse()
            .with_context(|| format!("RARA_INLINE_OUTPUT_BYTES={text:?} is not valid: expected a number of bytes"))?),
        Err(_) => Ok(rara_artifacts::DEFAULT_INLINE_BYTES),
    }
}

/// Where run `inputs` go when they are larger than `RARA_INLINE_OUTPUT_BYTES` and
/// `RARA_ARTIFACTS_URI` names a store (the store is opened only then).
pub async fn inputs_offload(inputs: &serde_json::Value) -> Result<Option<rara_operator::inputs::Offload>, Failure> {
    let inline_bytes = inline_bytes()?;
    if inputs.to_string().len() <= inline_bytes {
        return Ok(None);
    }
    let store = rara_platform::aws::artifact_store_from_env().await.context("RARA_ARTIFACTS_URI")?;
    Ok(store.map(|store| rara_operator::inputs::Offload { store, inline_bytes }))
}

pub async fn connect(config: &Config) -> Result<Store, Failure> {
    check_database(&config.database_url).await?;
    Store::connect(&config.database_url, 2)
        .await
        .context("cannot connect to the database at DATABASE_URL (is Postgres running? did you run `rara migrate`?)")
        .map_err(Failure::from)
}

/// How long the first connection may take before the CLI says Postgres does not answer.
const CONNECT_CHECK: std::time::Duration = std::time::Duration::from_secs(5);

/// One direct connection first, so that a failure says what is wrong and what to do (a
/// pool only says it timed out). Never prints the password.
async fn check_database(url: &str) -> Result<(), Failure> {
    use sqlx::Connection;
    let options: sqlx::postgres::PgConnectOptions =
        url.parse().context("DATABASE_URL is not a valid postgres:// URL").map_err(Failure::from)?;
    let at = format!("{}:{}", options.get_host(), options.get_port());
    let database = options.get_database().unwrap_or("postgres").to_owned();
    let advice = match tokio::time::timeout(CONNECT_CHECK, sqlx::PgConnection::connect_with(&options)).await {
        Ok(Ok(connection)) => {
            let _ = connection.close().await;
            return Ok(());
        }
        Err(_) => format!(
            "Postgres at {at} did not answer within {}: check that the host is right and reachable",
            rara_domain::human::duration(CONNECT_CHECK)
        ),
        Ok(Err(sqlx::Error::Io(e))) if e.kind() == std::io::ErrorKind::ConnectionRefused => format!(
            "nothing accepts connections at {at}: start Postgres (on this machine `scripts/ensure-postgres.sh` \
             starts the local cluster) or point DATABASE_URL at a running server"
        ),
        Ok(Err(e)) if e.as_database_error().and_then(|d| d.code()).as_deref() == Some("3D000") => {
            format!("the database {database:?} does not exist at {at}: `rara migrate` creates it and its schema")
        }
        Ok(Err(e)) if e.as_database_error().and_then(|d| d.code()).as_deref() == Some("28P01") => {
            format!("Postgres at {at} refused the credentials in DATABASE_URL")
        }
        Ok(Err(e)) => format!("cannot connect to Postgres at {at}: {e}"),
    };
    Err(Failure::new(ExitCode::DatabaseUnreachable, advice))
}

/// A token fired by Ctrl-C or SIGTERM.
pub fn stop_on_signal() -> CancellationToken {
    let stop = CancellationToken::new();
    let fire = stop.clone();
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = ctrl_c.await;
                    fire.cancel();
                    return;
                }
            };
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
        eprintln!("stopping: held work has RARA_SHUTDOWN_GRACE_SECONDS to finish, then it is given back...");
        fire.cancel();
    });
    stop
}

/// A runner's counters at exit: JSON on stdout, or one line on stderr.
pub fn summary(what: &str, counters: &Counters, json: bool) {
    if json {
        println!("{}", serde_json::to_string(counters).unwrap_or_default());
    } else {
        eprintln!(
            "{what}: leased {} sent {} released {} reaped {} pruned {} | claimed {} succeeded {} retried {} failed {} stale {} held {} dead-lettered {} lease-lost {}",
            counters.leased,
            counters.sent,
            counters.released,
            counters.reaped,
            counters.pruned,
            counters.claimed,
            counters.succeeded,
            counters.retried,
            counters.failed,
            counters.stale,
            counters.held,
            counters.dead_lettered,
            counters.lease_lost
        );
    }
}
