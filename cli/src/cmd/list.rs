//! `rara list`: recent runs, newest first.

use anyhow::Context;
use clap::{Args, ValueEnum};
use rara_domain::state::RunStatus;

use crate::{Failure, table};

/// List recent runs, newest first.
#[derive(Debug, Args)]
pub struct List {
    /// Only runs in this status.
    #[arg(long, value_enum)]
    pub(crate) status: Option<Status>,
    #[arg(long, default_value_t = 20)]
    pub(crate) limit: u32,
}

/// A run status as written on the command line (an unknown one is a usage error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Status {
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl From<Status> for RunStatus {
    fn from(status: Status) -> Self {
        match status {
            Status::Running => RunStatus::Running,
            Status::Succeeded => RunStatus::Succeeded,
            Status::Failed => RunStatus::Failed,
            Status::Cancelled => RunStatus::Cancelled,
        }
    }
}

pub async fn run(args: List, json: bool) -> Result<(), Failure> {
    let store = super::connect(&super::config()?).await?;
    let runs = store.list_runs(args.status.map(RunStatus::from), args.limit).await?;
    let pauses = store.pauses().await?;
    let paused: Vec<String> = runs
        .iter()
        .filter(|r| r.status == RunStatus::Running)
        .map(|r| super::pause::paused_note(r.id, &[], &pauses))
        .filter(|note| !note.is_empty())
        .collect();
    if json {
        let mut value = serde_json::to_value(&runs).context("cannot encode the runs")?;
        for run in value.as_array_mut().into_iter().flatten() {
            let id = run["id"].as_str().unwrap_or_default().to_owned();
            run["paused"] = serde_json::Value::Bool(pauses.iter().any(|p| p.kind == "run" && p.target == id));
        }
        println!("{}", serde_json::to_string_pretty(&value).context("cannot encode the runs")?);
    } else {
        print!("{}", table::runs(&runs));
        for note in paused {
            println!("{note}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_is_spelled_as_the_store_spells_it() {
        for status in Status::value_variants() {
            let name = status.to_possible_value().map(|v| v.get_name().to_owned());
            assert_eq!(name.as_deref(), Some(RunStatus::from(*status).as_str()));
        }
    }
}
