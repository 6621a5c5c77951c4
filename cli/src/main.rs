//! `rara`: operate rara from a terminal or a script.
//!
//! # Layout
//!
//! - `main.rs`: arguments, logging, exit codes.
//! - `commands.rs`: the commands over the store (migrate, submit, status, list, cancel, retry).
//! - `watch.rs`: `rara watch`, live progress until a run ends.
//! - `queues.rs`: `rara queue create`, `rara dlq list|redrive`, `rara capabilities`.
//! - `runners.rs`: `rara scheduler`, `rara executor` and `rara dev`: the Lambdas' handler
//!   code run locally.
//! - `bench.rs`: `rara bench`, noop steps end to end on a scratch database (the handler
//!   code in-process, an in-memory queue with SQS semantics or SQS itself).
//! - `table.rs`: the human tables (`--json` prints the same data as JSON).
//!
//! Exit codes: 0 success, 1 failure, 2 bad usage, 3 not found, 4 invalid workflow
//! definition, 5 the watched run ended other than `succeeded`, 6 `watch --timeout-seconds`
//! ran out with the run still running.

mod bench;
mod commands;
mod queues;
mod runners;
mod scale;
mod table;
mod watch;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use rara_domain::state::RunStatus;
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
        /// Watch the run until it ends (exit code 5 if it does not succeed).
        #[arg(long)]
        watch: bool,
    },
    /// Show a run and its steps.
    Status {
        /// The run id printed by `rara submit`.
        run_id: Uuid,
    },
    /// Show live progress per step until the run ends (exit code 5 if it does not succeed).
    Watch {
        run_id: Uuid,
        /// Poll interval in milliseconds.
        #[arg(long, default_value_t = 500)]
        interval_ms: u64,
        /// Give up after this long (exit code 6); by default watch until the run ends.
        #[arg(long)]
        timeout_seconds: Option<u64>,
    },
    /// List recent runs, newest first.
    List {
        /// Only runs in this status.
        #[arg(long, value_parser = ["running", "succeeded", "failed", "cancelled"])]
        status: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// Cancel a run (every unfinished step) or a single step.
    Cancel {
        /// A run id or a step id.
        id: Uuid,
        #[arg(long, default_value = "cancelled by an operator")]
        reason: String,
    },
    /// Give a failed or cancelled step a new attempt budget; its skipped dependents come back.
    Retry { step_id: Uuid },
    /// Inspect or redrive the dead-letter queue (RARA_DLQ_URL).
    Dlq {
        #[command(subcommand)]
        command: DlqCommand,
    },
    /// List the capabilities (name, version) a remote executor offers.
    Capabilities {
        /// e.g. http://127.0.0.1:50051
        endpoint: String,
    },
    /// Manage the step queue.
    Queue {
        #[command(subcommand)]
        command: QueueCommand,
    },
    /// Run the scheduler locally (the Lambda's handler code): reap, lease, enqueue.
    Scheduler {
        /// One pass (reap, then lease and send until nothing is due), then exit.
        #[arg(long)]
        once: bool,
    },
    /// Run the executor locally: poll SQS and drive the Lambda's batch handler
    /// (delete what succeeded, leave what must come back).
    Executor {
        /// Exit once the queue has stayed empty for --idle-seconds.
        #[arg(long)]
        until_idle: bool,
        #[arg(long, default_value_t = 5)]
        idle_seconds: u64,
        /// Messages per batch, like the event source's BatchSize (above 10, gathered from
        /// several receives within --batching-window-ms).
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        batch_size: u32,
        /// How long to keep gathering a batch after its first message, like the event
        /// source's MaximumBatchingWindowInSeconds.
        #[arg(long, default_value_t = 0)]
        batching_window_ms: u64,
    },
    /// Keep a local stack running: migrate, create the queues, run the scheduler and the
    /// executor in this process until Ctrl-C.
    Dev {
        /// The queue name to create and use.
        #[arg(long, default_value = "rara-dev")]
        queue_name: String,
    },
    /// Benchmark noop steps end to end on a scratch database of DATABASE_URL's server
    /// (created, migrated and dropped): throughput, commits per step, due-to-claimed
    /// latency, CPU per 1000 steps, peak RSS and an AWS cost estimate.
    Bench {
        /// How many noop steps to run.
        #[arg(long, default_value_t = 20_000)]
        steps: usize,
        /// Messages per executor batch, like the event source's BatchSize (above 10,
        /// gathered from several receives within --batching-window-ms).
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        batch: u32,
        /// How long an executor keeps gathering a batch after its first message.
        #[arg(long, default_value_t = 20)]
        batching_window_ms: u64,
        /// Concurrent executor loops (Lambda containers), each with its own 2-connection pool.
        #[arg(long, default_value_t = 2)]
        executors: u32,
        /// Chains of 5 steps fanning in to one step, instead of independent steps.
        #[arg(long)]
        dag: bool,
        /// Deliver through SQS (AWS_ENDPOINT_URL, e.g. LocalStack) instead of the in-memory queue.
        #[arg(long)]
        sqs: bool,
        /// The scheduler's pause after a pass that found nothing due, in milliseconds.
        #[arg(long, default_value_t = 50)]
        poll_ms: u64,
        /// Give up after this long.
        #[arg(long, default_value_t = 600)]
        timeout_seconds: u64,
        /// Soak: run for this many minutes, keeping the queue topped up (or, with --rate,
        /// submitting at that steady rate), and print the steps and latency of each minute.
        #[arg(long)]
        soak_minutes: Option<u64>,
        /// Submit the flat steps at this rate (steps/s) while running, instead of all at the
        /// start: due-to-claimed latency below capacity rather than behind a backlog.
        #[arg(long)]
        rate: Option<u32>,
        /// The scheduler only polls (every --poll-ms) instead of also waking on NOTIFY.
        #[arg(long)]
        no_listen: bool,
        /// Scale mode: time lease, claim and success of fresh steps with --history-small
        /// finished steps in the tables, then again with --history.
        #[arg(long)]
        scale: bool,
        /// Scale mode: finished steps in the tables for the second measurement.
        #[arg(long, default_value_t = 10_000_000)]
        history: u64,
        /// Scale mode: finished steps in the tables for the first measurement.
        #[arg(long, default_value_t = 10_000)]
        history_small: u64,
    },
}

#[derive(Debug, Subcommand)]
enum DlqCommand {
    /// Show the messages on the DLQ with their reasons (they stay there).
    List {
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Move the DLQ's messages back to the step queue.
    Redrive {
        #[arg(long, default_value_t = 1000)]
        limit: u32,
    },
}

#[derive(Debug, Subcommand)]
enum QueueCommand {
    /// Create the queue and its DLQ with the aligned settings (visibility timeout =
    /// RARA_VISIBILITY_TIMEOUT_SECONDS, maxReceiveCount = RARA_MAX_RECEIVE_COUNT), for
    /// local use. Prints `export RARA_QUEUE_URL=... RARA_DLQ_URL=...` lines.
    Create {
        #[arg(long, default_value = "rara-steps")]
        name: String,
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

impl Failure {
    /// A failure with only an exit code (its message was already printed).
    pub fn silent(code: u8) -> Self {
        Failure { code, error: anyhow::anyhow!("") }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            let message = format!("{:#}", failure.error);
            if !message.is_empty() {
                eprintln!("error: {message}");
            }
            ExitCode::from(failure.code)
        }
    }
}

fn init_cli_logging() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("RARA_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .try_init();
}

async fn run(cli: Cli) -> Result<(), Failure> {
    let env = |k: &str| std::env::var(k).ok();
    let json = cli.json;
    match cli.command {
        Command::Scheduler { once } => return runners::scheduler(once, json).await,
        Command::Executor { until_idle, idle_seconds, batch_size, batching_window_ms } => {
            let idle = until_idle.then(|| std::time::Duration::from_secs(idle_seconds));
            let window = std::time::Duration::from_millis(batching_window_ms);
            return runners::executor(idle, batch_size, window, json).await;
        }
        Command::Dev { queue_name } => return runners::dev(&queue_name).await,
        Command::Bench {
            steps,
            batch,
            batching_window_ms,
            executors,
            dag,
            sqs,
            poll_ms,
            timeout_seconds,
            soak_minutes,
            rate,
            no_listen,
            scale,
            history,
            history_small,
        } => {
            init_cli_logging();
            let options = bench::Options {
                steps,
                batch,
                batching_window: std::time::Duration::from_millis(batching_window_ms),
                executors: executors.max(1),
                dag,
                sqs,
                poll: std::time::Duration::from_millis(poll_ms),
                timeout: std::time::Duration::from_secs(timeout_seconds),
                soak: soak_minutes.map(|m| std::time::Duration::from_secs(m * 60)),
                rate: rate.filter(|r| *r > 0),
                listen: !no_listen,
                scale: scale.then_some(scale::Options { small: history_small, large: history.max(history_small) }),
            };
            return bench::bench(options, json).await;
        }
        _ => init_cli_logging(),
    }
    let config = rara_domain::config::Config::from_lookup("cli", env)?;
    match cli.command {
        Command::Migrate => commands::migrate(&config, json).await,
        Command::Submit { file, watch } => commands::submit(&config, &file, watch, json).await,
        Command::Status { run_id } => commands::status(&config, run_id, json).await,
        Command::Watch { run_id, interval_ms, timeout_seconds } => {
            let timeout = timeout_seconds.map(std::time::Duration::from_secs);
            commands::watch(&config, run_id, interval_ms, timeout, json).await
        }
        Command::List { status, limit } => {
            let status = status.map(|s| match s.as_str() {
                "succeeded" => RunStatus::Succeeded,
                "failed" => RunStatus::Failed,
                "cancelled" => RunStatus::Cancelled,
                _ => RunStatus::Running,
            });
            commands::list(&config, status, limit, json).await
        }
        Command::Cancel { id, reason } => commands::cancel(&config, id, &reason, json).await,
        Command::Retry { step_id } => commands::retry(&config, step_id, json).await,
        Command::Dlq { command: DlqCommand::List { limit } } => queues::dlq_list(limit, json).await,
        Command::Dlq { command: DlqCommand::Redrive { limit } } => queues::dlq_redrive(limit, json).await,
        Command::Capabilities { endpoint } => queues::capabilities(&endpoint, json).await,
        Command::Queue { command: QueueCommand::Create { name } } => queues::create(&config, &name, json).await,
        Command::Scheduler { .. } | Command::Executor { .. } | Command::Dev { .. } | Command::Bench { .. } => Ok(()),
    }
}
