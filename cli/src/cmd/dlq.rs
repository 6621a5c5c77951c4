//! `rara dlq list|purge|redrive`: the dead-letter queue (RARA_DLQ_URL), each entry classified
//! as `rara_operator::dlq` says (the console's `/dlq` page acts through the same functions).
//! The SQS client follows the SDK's standard environment (`AWS_ENDPOINT_URL` for LocalStack).

use clap::{Args, Subcommand};
use rara_operator::dlq::{self, DeadLetters, Entry, Purged, Redriven};
use rara_platform::dlq::SqsDeadLetters;

use crate::exit::ExitCode;
use crate::{Failure, table};

/// Inspect, purge or redrive the dead-letter queue (RARA_DLQ_URL).
#[derive(Debug, Args)]
pub struct Dlq {
    #[command(subcommand)]
    command: DlqCommand,
}

#[derive(Debug, Subcommand)]
enum DlqCommand {
    /// Show the messages on the DLQ, each classified: rejected (with rara's reason), stale
    /// (its step moved on), live (its step still waits for it) or unknown (they stay there).
    List {
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Delete the DLQ's stale messages (their steps finished, were leased again or handed back).
    Purge {
        /// Required: purge removes only the entries `rara dlq list` classifies stale.
        #[arg(long)]
        stale: bool,
        #[arg(long, default_value_t = 1000)]
        limit: u32,
    },
    /// Move the live messages and rara's own dead-letters back to the step queue; stale and
    /// unknown ones stay on the DLQ.
    Redrive {
        #[arg(long, default_value_t = 1000)]
        limit: u32,
    },
}

pub async fn run(args: Dlq, json: bool) -> Result<(), Failure> {
    match args.command {
        DlqCommand::List { limit } => list(limit, json).await,
        DlqCommand::Purge { stale: false, .. } => Err(Failure::new(
            ExitCode::Usage,
            "purge needs --stale: it removes only the entries whose steps moved on (see `rara dlq list`)",
        )),
        DlqCommand::Purge { stale: true, limit } => purge(limit, json).await,
        DlqCommand::Redrive { limit } => redrive(limit, json).await,
    }
}

fn required(var: &str) -> Result<String, Failure> {
    std::env::var(var)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .ok_or_else(|| anyhow::anyhow!("{var} is not set (run `rara queue create` and export what it prints)").into())
}

/// The DLQ and the step queue, and the store the entries are looked up in.
async fn open() -> Result<SqsDeadLetters, Failure> {
    required("RARA_DLQ_URL")?;
    required("RARA_QUEUE_URL")?;
    let store = super::connect(&super::config()?).await?;
    SqsDeadLetters::from_env(store)
        .await
        .ok_or_else(|| anyhow::anyhow!("RARA_DLQ_URL and RARA_QUEUE_URL must be set").into())
}

async fn list(limit: u32, json: bool) -> Result<(), Failure> {
    let entries = open().await?.list(limit).await.map_err(failure)?;
    let rows: Vec<serde_json::Value> = entries.iter().map(json_of).collect();
    if json {
        println!("{}", serde_json::Value::Array(rows));
    } else if rows.is_empty() {
        println!("the dead-letter queue is empty");
    } else {
        print!("{}", table::dead_letters(&rows));
    }
    Ok(())
}

async fn purge(limit: u32, json: bool) -> Result<(), Failure> {
    let Purged { purged, kept } = open().await?.purge_stale(limit).await.map_err(failure)?;
    if json {
        println!("{}", serde_json::json!({"purged": purged, "kept": kept}));
    } else {
        println!("removed {purged} stale message(s) from the DLQ; {kept} other(s) stay");
    }
    Ok(())
}

async fn redrive(limit: u32, json: bool) -> Result<(), Failure> {
    let (done, unsent) = match open().await?.redrive(limit).await {
        Ok(done) => (done, None),
        Err(dlq::Error::Unsent { unsent, done }) => (done, Some(unsent)),
        Err(e) => return Err(failure(e)),
    };
    let Redriven { redriven, stale, unknown, rejected } = done;
    if json {
        println!(
            "{}",
            serde_json::json!({"redriven": redriven, "skipped": {"stale": stale, "unknown": unknown, "rejected": rejected}})
        );
    } else {
        println!("moved {redriven} message(s) back to the step queue");
        if done.skipped() > 0 {
            println!(
                "skipped {}: {stale} stale (their steps moved on; `rara dlq purge --stale` removes them), \
                 {unknown} for unknown steps, {rejected} not step messages; they stay on the DLQ",
                done.skipped()
            );
        }
    }
    if let Some(unsent) = unsent {
        return Err(anyhow::anyhow!("{unsent} message(s) could not be sent back; they stay on the DLQ").into());
    }
    Ok(())
}

/// What `--json` prints of an entry.
fn json_of(entry: &Entry) -> serde_json::Value {
    serde_json::to_value(entry).unwrap_or_default()
}

fn failure(e: dlq::Error) -> Failure {
    match e {
        dlq::Error::Store(e) => e.into(),
        e => anyhow::Error::new(e).into(),
    }
}
