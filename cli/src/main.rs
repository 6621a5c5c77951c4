//! `rara`: operate rara from a terminal or a script.
//!
//! # Layout
//!
//! - `main.rs`: the command line, logging, exit codes.
//! - `cmd/`: one file per command, each with its arguments and a `run` function; `cmd/mod.rs`
//!   holds what they share (configuration, store connection, the runners' stop signal).
//! - `watch.rs`: the live display of `rara watch` and `rara submit --watch`.
//! - `table.rs`: the human tables (`--json` prints the same data as JSON).
//! - `failure.rs`: errors with their exit code; `exit.rs`: the exit codes ([`exit::ExitCode`]),
//!   one variant each, and the table the book prints (`rara exit-codes`).
//! - `via_api.rs`: `--api URL`, the commands over rara's HTTP API instead of the database.
//!
//! Benchmarks are not here: they are the `rara-bench` crate (`tools/bench`).

mod cmd;
mod exit;
mod failure;
mod table;
mod via_api;
mod watch;

use clap::{Parser, Subcommand};

use crate::exit::ExitCode;
pub use crate::failure::Failure;

#[derive(Debug, Parser)]
#[command(name = "rara", version, about = "rara: a serverless workflow-step executor", long_about = None)]
struct Cli {
    /// Print machine-readable JSON instead of tables.
    #[arg(long, global = true)]
    json: bool,
    /// Run submit, status, list, cancel and retry through rara's HTTP API at this URL instead of
    /// the database (the token from RARA_API_TOKEN).
    #[arg(long, global = true, value_name = "URL", env = "RARA_API_URL")]
    api: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Migrate(cmd::migrate::Migrate),
    Submit(cmd::submit::Submit),
    Workflow(cmd::workflow::Workflow),
    Schedule(cmd::schedule::Schedule),
    Status(cmd::status::Status),
    Trace(cmd::trace::Trace),
    Watch(cmd::watch::Watch),
    List(cmd::list::List),
    Cancel(cmd::cancel::Cancel),
    Retry(cmd::retry::Retry),
    Rerun(cmd::rerun::RerunArgs),
    Replay(cmd::replay::ReplayArgs),
    Signal(cmd::signal::SignalArgs),
    Event(cmd::signal::Event),
    Dlq(cmd::dlq::Dlq),
    Prune(cmd::prune::Prune),
    Artifact(cmd::artifact::Artifact),
    Capabilities(cmd::capabilities::Capabilities),
    Queue(cmd::queue::Queue),
    Limits(cmd::limits::Limits),
    Pause(cmd::pause::Pause),
    Resume(cmd::pause::Resume),
    Secrets(cmd::secrets::Secrets),
    Scheduler(cmd::scheduler::Scheduler),
    Executor(cmd::executor::Executor),
    Dev(cmd::dev::Dev),
    Ui(cmd::ui::Ui),
    #[command(hide = true)]
    ExitCodes(cmd::exit_codes::ExitCodes),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::Failure.into();
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::Success.into(),
        Err(failure) => {
            let message = format!("{:#}", failure.error);
            if !message.is_empty() {
                eprintln!("error: {message}");
            }
            failure.code.into()
        }
    }
}

/// Logging for the commands over the store (the runners log like the Lambdas do).
fn init_cli_logging() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("RARA_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .try_init();
}

impl Command {
    /// The runners log like the Lambdas do (`rara_platform::wiring::init_logging`).
    fn logs_like_a_lambda(&self) -> bool {
        matches!(self, Command::Scheduler(_) | Command::Executor(_) | Command::Dev(_))
    }
}

async fn run(cli: Cli) -> Result<(), Failure> {
    let json = cli.json;
    if !cli.command.logs_like_a_lambda() {
        init_cli_logging();
    }
    if let Some(url) = &cli.api {
        return via_api::run(cli.command, url, json).await;
    }
    match cli.command {
        Command::Migrate(args) => cmd::migrate::run(args, json).await,
        Command::Submit(args) => cmd::submit::run(args, json).await,
        Command::Workflow(args) => cmd::workflow::run(args, json).await,
        Command::Schedule(args) => cmd::schedule::run(args, json).await,
        Command::Status(args) => cmd::status::run(args, json).await,
        Command::Trace(args) => cmd::trace::run(args, json).await,
        Command::Watch(args) => cmd::watch::run(args, json).await,
        Command::List(args) => cmd::list::run(args, json).await,
        Command::Cancel(args) => cmd::cancel::run(args, json).await,
        Command::Retry(args) => cmd::retry::run(args, json).await,
        Command::Rerun(args) => cmd::rerun::run(args, json).await,
        Command::Replay(args) => cmd::replay::run(args, json).await,
        Command::Signal(args) => cmd::signal::signal(args, json).await,
        Command::Event(args) => cmd::signal::event(args, json).await,
        Command::Dlq(args) => cmd::dlq::run(args, json).await,
        Command::Prune(args) => cmd::prune::run(args, json).await,
        Command::Artifact(args) => cmd::artifact::run(args, json).await,
        Command::Capabilities(args) => cmd::capabilities::run(args, json).await,
        Command::Queue(args) => cmd::queue::run(args, json).await,
        Command::Limits(args) => cmd::limits::run(args, json).await,
        Command::Pause(args) => cmd::pause::pause(args, json).await,
        Command::Resume(args) => cmd::pause::resume(args, json).await,
        Command::Secrets(args) => cmd::secrets::run(args, json).await,
        Command::Scheduler(args) => cmd::scheduler::run(args, json).await,
        Command::Executor(args) => cmd::executor::run(args, json).await,
        Command::Dev(args) => cmd::dev::run(args, json).await,
        Command::Ui(args) => cmd::ui::run(args, json).await,
        Command::ExitCodes(args) => cmd::exit_codes::run(args),
    }
}
