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
    let run = super::connect(&super::config()?).await?.run(args.run_id).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&run).context("cannot encode the run")?);
    } else {
        print!("{}", table::run(&run));
    }
    Ok(())
}
