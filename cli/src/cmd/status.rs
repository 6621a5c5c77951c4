//! `rara status`: a run and its steps.

use anyhow::Context;
use clap::Args;
use uuid::Uuid;

use crate::{Failure, table};

/// Show a run and its steps.
#[derive(Debug, Args)]
pub struct Status {
    /// The run id printed by `rara submit`.
    pub(crate) run_id: Uuid,
}

pub async fn run(args: Status, json: bool) -> Result<(), Failure> {
    let store = super::connect(&super::config()?).await?;
    let run = store.run(args.run_id).await?;
    let operations: Vec<&str> = run.steps.iter().map(|s| s.operation.as_str()).collect();
    let paused = super::pause::paused_note(run.id, &operations, &store.pauses().await?);
    if json {
        // The run's trace id beside it (`rara trace` shows the timeline).
        let trace_id = store.run_trace(args.run_id).await?.as_deref().and_then(rara_runtime::trace_id);
        let mut value = serde_json::to_value(&run).context("cannot encode the run")?;
        value["paused"] = serde_json::Value::from((!paused.is_empty()).then_some(paused));
        value["trace_id"] = trace_id.into();
        println!("{}", serde_json::to_string_pretty(&value).context("cannot encode the run")?);
    } else {
        print!("{}", table::run(&run));
        if !paused.is_empty() {
            println!("\n{paused} (rara resume)");
        }
    }
    Ok(())
}
