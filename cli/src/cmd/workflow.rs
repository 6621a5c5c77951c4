//! `rara workflow`: registered definitions. `register FILE` stores a definition under its name,
//! checked as submit checks it (a new version when its content changed, the same version when
//! not); `list` and `show NAME[@VERSION]` read them; `rara submit --workflow NAME[@VERSION]` runs
//! one.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use rara_domain::workflow::WorkflowRef;

use crate::{Failure, table};

/// Register workflow definitions, list them, show one.
#[derive(Debug, Args)]
pub struct Workflow {
    #[command(subcommand)]
    command: WorkflowCommand,
}

#[derive(Debug, Subcommand)]
enum WorkflowCommand {
    /// Register a definition (JSON or YAML) under its `name`: a new version when its content
    /// changed, the same version when not. It is checked as `rara submit` checks it (a required
    /// input is given at submit).
    Register {
        /// The definition file; `.json` is read as JSON, anything else as YAML.
        file: PathBuf,
    },
    /// The registered workflows: name, newest version, how many versions.
    List,
    /// A registered definition: `NAME` (the newest version) or `NAME@VERSION`.
    Show {
        #[arg(value_name = "NAME[@VERSION]")]
        workflow: WorkflowRef,
    },
}

/// How many registered workflows `list` shows.
const LIST_LIMIT: u32 = 1000;

pub async fn run(args: Workflow, json: bool) -> Result<(), Failure> {
    let config = super::config()?;
    match args.command {
        WorkflowCommand::Register { file } => {
            let definition = super::submit::read_definition(&file)?;
            let builtins = rara_builtins::registry()?;
            definition
                .check_for_register(&config, |op, version| builtins.in_process(op, version).is_some())
                .with_context(|| format!("{} is not a valid workflow definition", file.display()))?;
            let content = serde_json::to_value(&definition).context("cannot encode the definition")?;
            let store = super::connect(&config).await?;
            let registered = store.register_definition(&definition.name, &content).await?;
            if json {
                println!("{}", serde_json::to_string(&registered).context("cannot encode the answer")?);
            } else {
                let what = if registered.created { "registered" } else { "unchanged, already" };
                println!("{what} {}@{}", registered.name, registered.version);
            }
        }
        WorkflowCommand::List => {
            let registrations = super::connect(&config).await?.definitions(LIST_LIMIT).await?;
            if json {
                println!("{}", serde_json::to_string(&registrations).context("cannot encode the list")?);
            } else {
                print!("{}", table::registrations(&registrations));
            }
        }
        WorkflowCommand::Show { workflow } => {
            let found = super::connect(&config).await?.definition(&workflow.name, workflow.version).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&found).context("cannot encode the definition")?);
            } else {
                println!(
                    "{}@{}  registered {}",
                    found.name,
                    found.version,
                    found.created_at.format("%Y-%m-%d %H:%M:%S")
                );
                println!("{}", serde_json::to_string_pretty(&found.definition).context("cannot encode it")?);
            }
        }
    }
    Ok(())
}
