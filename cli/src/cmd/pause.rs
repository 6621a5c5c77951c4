//! `rara pause` and `rara resume`: park a run, a concurrency key (or group `tenant-*`) or an
//! operation: nothing new of it is leased, what runs finishes, nothing fails.

use clap::{Args, Subcommand};
use rara_store::flow::{Pause as PauseRow, PauseTarget};
use uuid::Uuid;

use crate::Failure;
use crate::exit::ExitCode;

/// Pause a run, a key or an operation: nothing new is leased for it; running attempts finish.
#[derive(Debug, Args)]
pub struct Pause {
    #[command(subcommand)]
    what: What,
}

/// Resume what `rara pause` paused: its due steps are leased again at once.
#[derive(Debug, Args)]
pub struct Resume {
    #[command(subcommand)]
    what: What,
}

#[derive(Debug, Subcommand)]
enum What {
    /// A workflow run.
    Run { run_id: Uuid },
    /// A concurrency key, or a group of keys (`tenant-*`).
    Key {
        #[arg(value_parser = super::limits::target)]
        key: String,
    },
    /// An operation (`http.request`), in every run.
    Operation { operation: String },
}

impl What {
    fn target(self) -> PauseTarget {
        match self {
            What::Run { run_id } => PauseTarget::Run(run_id),
            What::Key { key } => PauseTarget::Key(key),
            What::Operation { operation } => PauseTarget::Operation(operation),
        }
    }
}

fn describe(target: &PauseTarget) -> String {
    match target {
        PauseTarget::Run(id) => format!("run {id}"),
        PauseTarget::Key(key) => format!("key {key}"),
        PauseTarget::Operation(op) => format!("operation {op}"),
    }
}

pub async fn pause(args: Pause, json: bool) -> Result<(), Failure> {
    let store = super::connect(&super::config()?).await?;
    let target = args.what.target();
    let newly = store.pause(&target).await?;
    if json {
        println!("{}", serde_json::json!({"paused": describe(&target), "already": !newly}));
    } else if newly {
        println!("{} paused: nothing new is leased; running attempts finish", describe(&target));
    } else {
        println!("{} was paused already", describe(&target));
    }
    Ok(())
}

pub async fn resume(args: Resume, json: bool) -> Result<(), Failure> {
    let store = super::connect(&super::config()?).await?;
    let target = args.what.target();
    let resumed = store.resume(&target).await?;
    if json {
        println!("{}", serde_json::json!({"resumed": describe(&target), "was_paused": resumed}));
    } else if resumed {
        println!("{} resumed", describe(&target));
    } else {
        return Err(Failure::new(ExitCode::NotFound, format!("{} is not paused", describe(&target))));
    }
    Ok(())
}

/// The paused line of `rara status` and `rara list`: which of `pauses` hold back the run
/// `run_id` (itself, or one of `operations`). Empty when none does.
pub fn paused_note(run_id: Uuid, operations: &[&str], pauses: &[PauseRow]) -> String {
    let run = run_id.to_string();
    let hits: Vec<String> = pauses
        .iter()
        .filter(|p| match p.kind.as_str() {
            "run" => p.target == run,
            "operation" => operations.contains(&p.target.as_str()),
            _ => false,
        })
        .map(|p| format!("{} {} since {}", p.kind, p.target, p.paused_at.format("%Y-%m-%d %H:%M:%S")))
        .collect();
    if hits.is_empty() { String::new() } else { format!("paused: {}", hits.join(", ")) }
}
