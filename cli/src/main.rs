//! `rara`: operate rara from a terminal or a script.
//!
//! # Layout
//!
//! - `main.rs`: arguments, logging, exit codes.
//! - `commands.rs`: one function per command, over the store.
//! - `table.rs`: the human tables (`--json` prints the same data as JSON).
//!
//! Exit codes: 0 success, 1 failure, 2 bad usage, 3 not found, 4 invalid workflow definition.

mod commands;
mod table;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use uuid::Uuid;

#[derive(Debug, Parser)]
#[command(name = "rara", version, about = "rara: a serverless workflow-step executor", long_about = None)]
struct Cli {
    /// Print machine-readable JSON instead of tables.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create the database if missing and apply pending migrations (idempotent).
    Migrate,
    /// Submit a workflow definition (JSON or YAML) and print the run id.
    Submit {
        /// The definition file; `.json` is read as JSON, anything else as YAML.
        file: PathBuf,
    },
    /// Show a run and its steps.
    Status {
        /// The run id printed by `rara submit`.
        run_id: Uuid,
    },
}

/// A failure with the exit code a script can rely on.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub error: anyhow::Error,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(error: E) -> Self {
        let error = error.into();
        let code = match error.downcast_ref::<rara_store::Error>() {
            Some(rara_store::Error::RunNotFound(_) | rara_store::Error::StepNotFound(_)) => 3,
            _ if error.downcast_ref::<rara_domain::workflow::Error>().is_some() => 4,
            _ => 1,
        };
        Failure { code, error }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("RARA_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {:#}", failure.error);
            ExitCode::from(failure.code)
        }
    }
}

async fn run(cli: Cli) -> Result<(), Failure> {
    let config = rara_domain::config::Config::from_lookup("cli", |k| std::env::var(k).ok())?;
    match cli.command {
        Command::Migrate => commands::migrate(&config, cli.json).await,
        Command::Submit { file } => commands::submit(&config, &file, cli.json).await,
        Command::Status { run_id } => commands::status(&config, run_id, cli.json).await,
    }
}
