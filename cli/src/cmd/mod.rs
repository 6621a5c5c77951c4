//! One module per command, each with its arguments (`#[derive(Args)]`) and a `run` function;
//! here what several of them share: the configuration, the store connection, the stop
//! signal of the runners and their summary line.

pub mod cancel;
pub mod capabilities;
pub mod dev;
pub mod dlq;
pub mod executor;
pub mod list;
pub mod migrate;
pub mod queue;
pub mod retry;
pub mod scheduler;
pub mod status;
pub mod submit;
pub mod watch;

use anyhow::Context;
use rara_domain::config::Config;
use rara_runtime::metrics::Counters;
use rara_store::Store;
use tokio_util::sync::CancellationToken;

use crate::Failure;

/// The configuration of the commands over the store, from the environment.
pub fn config() -> Result<Config, Failure> {
    Ok(Config::from_lookup("cli", |k| std::env::var(k).ok())?)
}

pub async fn connect(config: &Config) -> Result<Store, Failure> {
    Store::connect(&config.database_url, 2)
        .await
        .context("cannot connect to the database at DATABASE_URL (is Postgres running? did you run `rara migrate`?)")
        .map_err(Failure::from)
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
            "{what}: leased {} sent {} released {} reaped {} | claimed {} succeeded {} retried {} failed {} stale {} held {} dead-lettered {} lease-lost {}",
            counters.leased,
            counters.sent,
            counters.released,
            counters.reaped,
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
