//! `rara status`: a run and its steps.

use anyhow::Context;
use clap::Args;
use uuid::Uuid;

use crate::{Failure, table};

/// Show a run and its steps.
#[derive(Debug, Args)]
pub struct Status {
    /// The run id printed by `rara submit`.
    run_id: Uuid,
}

pub async fn run(args: Status, json: bool) -> Result<(), Failure> {
    let store = super::connect(&super::config()?).await?;
    let run = store.run(args.run_id).await?;
    if json {
        // The run's trace id beside it (`rara trace` shows the timeline).
        let trace_id = store.run_trace(args.run_id).await?.as_deref().and_then(rara_runtime::trace_id);
        let mut doc = serde_json::to_value(&run).context("cannot encode the run")?;
        doc["trace_id"] = trace_id.into();
        println!("{}", serde_json::to_string_pretty(&doc).context("cannot encode the run")?);
    } else {
        print!("{}", table::run(&run));
    }
    Ok(())
}
