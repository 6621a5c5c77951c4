//! `rara submit`: store a workflow definition as a run, optionally watching it.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use rara_domain::workflow::{Format, WorkflowDefinition};

use crate::Failure;

/// Submit a workflow definition (JSON or YAML) and print the run id.
#[derive(Debug, Args)]
pub struct Submit {
    /// The definition file; `.json` is read as JSON, anything else as YAML.
    file: PathBuf,
    /// Watch the run until it ends (exit code 5 if it does not succeed).
    #[arg(long)]
    watch: bool,
}

pub async fn run(args: Submit, json: bool) -> Result<(), Failure> {
    let config = super::config()?;
    let file = &args.file;
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    // Steps routing gives an in-process executor must fit one invocation: they cannot detach.
    let builtins = rara_runtime::wiring::builtin_registry()?;
    let in_process = |operation: &str, version: Option<&str>| builtins.in_process(operation, version).is_some();
    let plan = WorkflowDefinition::parse(&text, Format::from_path(file))
        .and_then(|definition| definition.plan_for(&config, in_process))
        .with_context(|| format!("{} is not a valid workflow definition", file.display()))?;
    let store = super::connect(&config).await?;
    let submitted = store.submit(&plan).await?;
    if json {
        println!("{}", serde_json::json!({ "id": submitted.run_id, "created": submitted.created }));
    } else {
        println!("{}", submitted.run_id);
        if !submitted.created {
            eprintln!("note: idempotency key matched an existing run; nothing new was submitted");
        }
    }
    if args.watch {
        return super::watch::until_done(&store, submitted.run_id, Duration::from_millis(500), None, json).await;
    }
    Ok(())
}
