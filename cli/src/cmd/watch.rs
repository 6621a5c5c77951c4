//! `rara watch`: live progress per step until a run ends (the display is `crate::watch`).

use std::time::Duration;

use anyhow::Context;
use clap::Args;
use rara_store::Store;
use uuid::Uuid;

use crate::exit::ExitCode;
use crate::{Failure, table};

/// Show live progress per step until the run ends (exit code 5 if it does not succeed).
#[derive(Debug, Args)]
pub struct Watch {
    run_id: Uuid,
    /// Poll interval in milliseconds.
    #[arg(long, default_value_t = 500)]
    interval_ms: u64,
    /// Give up after this long (exit code 6); by default watch until the run ends.
    #[arg(long)]
    timeout_seconds: Option<u64>,
}

pub async fn run(args: Watch, json: bool) -> Result<(), Failure> {
    let store = super::connect(&super::config()?).await?;
    let interval = Duration::from_millis(args.interval_ms.max(50));
    until_done(&store, args.run_id, interval, args.timeout_seconds.map(Duration::from_secs), json).await
}

/// Watches `run_id` until it ends (or `timeout`), prints it, and fails with the exit code
/// of its final status.
pub async fn until_done(
    store: &Store,
    run_id: Uuid,
    interval: Duration,
    timeout: Option<Duration>,
    json: bool,
) -> Result<(), Failure> {
    let watching = crate::watch::watch(store, run_id, json, interval);
    let run = match timeout {
        None => watching.await?,
        Some(limit) => match tokio::time::timeout(limit, watching).await {
            Ok(run) => run?,
            Err(_) => {
                eprintln!("run {run_id} is still running after {} s", limit.as_secs());
                return Err(Failure::silent(ExitCode::StillRunning));
            }
        },
    };
    if json {
        println!("{}", serde_json::to_string(&run).context("cannot encode the run")?);
    } else {
        print!("{}", table::run(&run));
    }
    match crate::watch::exit_code(run.status) {
        ExitCode::Success => Ok(()),
        code => Err(Failure::silent(code)),
    }
}
