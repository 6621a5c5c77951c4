//! `rara-bench`: noop steps end to end on the Postgres path, in one process, through
//! rara's store and runtime APIs.
//!
//! Every run creates a scratch database (`rara_bench_<random>`) on the server of
//! `DATABASE_URL`, migrates it, measures, and drops it. `rara-bench --help` lists the modes;
//! BENCHMARKS.md has the results and how to read them.
//!
//! # Layout
//!
//! - `main.rs`: arguments ([`Mode`] and the options of a run), the scratch database, output.
//! - `throughput.rs`: the `flat`, `dag`, `rate` and `soak` modes: the scheduler loop and K
//!   executor loops (the Lambdas' handler code) against an in-memory queue or SQS.
//! - `workload.rs`: the workflows submitted (flat runs, DAG units) and the submitter of
//!   `rate` and `soak`.
//! - `measure.rs`: what is read after a run (latency, reads, statistics) and the [`Report`].
//! - `minutes.rs`: what a soak reads at the end of each minute while the loops run (latency,
//!   rows in the history tables), before `--prune-after` lets the scheduler delete it.
//! - `report.rs`: the report's types and its text form (`--json` prints the same as JSON).
//! - `counted.rs`: a queue wrapper that counts requests (what SQS and Lambda would bill).
//! - `cost.rs`: the AWS cost estimate and its list prices.
//! - `system.rs`: CPU, memory and load of this process and of the Postgres backends.
//! - `scale.rs`: the `scale` mode: claim latency against finished history.
//! - `backlog.rs`: the `backlog` mode: messages per step behind a queue that backs up past
//!   the execution lease (lease churn), on SQS by default.

mod backlog;
mod cost;
mod counted;
mod measure;
mod minutes;
mod report;
mod scale;
mod system;
mod throughput;
mod workload;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use rara_testkit::scratch::ScratchDb;

use crate::report::Report;

#[derive(Debug, Parser)]
#[command(
    name = "rara-bench",
    version,
    about = "Benchmark rara: noop steps end to end on a scratch database of DATABASE_URL's server \
             (created, migrated and dropped)",
    long_about = None
)]
struct Cli {
    /// Print the report as one line of JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    mode: ModeCommand,
}

#[derive(Debug, Subcommand)]
enum ModeCommand {
    /// Independent noop steps, all submitted before the loops start: throughput behind a
    /// backlog, commits per step, due-to-claimed, CPU per 1000 steps, peak RSS, AWS cost.
    Flat {
        /// How many noop steps to run.
        #[arg(long, default_value_t = 20_000)]
        steps: usize,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Chains of 5 steps fanning in to one step (units of 21), all submitted before the loops start.
    Dag {
        /// How many noop steps to run (rounded up to whole units).
        #[arg(long, default_value_t = 20_000)]
        steps: usize,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Flat steps submitted at a steady rate while the loops run: due-to-claimed and
    /// due-to-enqueued below capacity rather than behind a backlog.
    Rate {
        /// Submission rate, steps/s (in runs every 50 ms).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        rate: u32,
        /// How many noop steps to submit.
        #[arg(long, default_value_t = 20_000)]
        steps: usize,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Run for some minutes, keeping the queue topped up (or, with --rate, submitting at that
    /// steady rate), and print the steps, latency and history rows of each minute.
    Soak {
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        minutes: u32,
        /// Submit at this rate (steps/s) instead of keeping the queue topped up.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        rate: Option<u32>,
        /// Bounded history: the scheduler's retention (its maintenance deletes finished
        /// runs older than this, as in production), e.g. `90s`, `2m`; at least 70s, so that
        /// each minute is read before its runs can go. Without it, the environment's
        /// RARA_RETENTION_DAYS (30 days by default: nothing is deleted).
        #[arg(long, value_parser = parse_prune_after)]
        prune_after: Option<Duration>,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Time lease, claim and success of fresh steps with --history-small finished steps in
    /// the tables, then again with --history.
    Scale {
        /// Finished steps in the tables for the second measurement.
        #[arg(long, default_value_t = 10_000_000)]
        history: u64,
        /// Finished steps in the tables for the first measurement.
        #[arg(long, default_value_t = 10_000)]
        history_small: u64,
    },
    /// Lease churn: sleep steps about ten times the executors' capacity, all leased and sent at
    /// once, with an execution lease much shorter than the last messages wait; messages sent
    /// and received per step, stale deliveries, steps the reaper leased again.
    Backlog {
        /// How many `sleep` steps to run.
        #[arg(long, default_value_t = 200)]
        steps: usize,
        /// How long each step sleeps, in seconds.
        #[arg(long, default_value_t = 1.0)]
        sleep_seconds: f64,
        /// Concurrent executor loops.
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
        executors: u32,
        /// Messages per executor batch (one receive).
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10))]
        batch: u32,
        /// RARA_LEASE_SECONDS; also the visibility and function timeouts (heartbeat: a third).
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(3..))]
        lease_seconds: u64,
        /// RARA_DELIVERY_TIMEOUT_SECONDS (else the environment's, else rara's default:
        /// visibility × maxReceiveCount). Equal to the lease approximates the old behaviour.
        #[arg(long)]
        delivery_timeout_seconds: Option<u64>,
        /// The queue: SQS at AWS_ENDPOINT_URL (e.g. LocalStack), or in memory with SQS semantics.
        #[arg(long, value_enum, default_value_t = QueueKind::Sqs)]
        queue: QueueKind,
        /// Give up after this long.
        #[arg(long, default_value_t = 300)]
        timeout_seconds: u64,
    },
}

/// How the loops of a throughput mode run.
#[derive(Debug, Args)]
struct RunArgs {
    /// Messages per executor batch, like the event source's BatchSize (above 10, gathered
    /// from several receives within --batching-window-ms).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    batch: u32,
    /// How long an executor keeps gathering a batch after its first message.
    #[arg(long, default_value_t = 20)]
    batching_window_ms: u64,
    /// Concurrent executor loops (Lambda containers), each with its own 2-connection pool.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    executors: u32,
    /// The queue delivering the messages: in memory with SQS semantics, or SQS itself
    /// (AWS_ENDPOINT_URL, e.g. LocalStack).
    #[arg(long, value_enum, default_value_t = QueueKind::Memory)]
    queue: QueueKind,
    /// The scheduler's pause after a pass that found nothing due, in milliseconds.
    #[arg(long, default_value_t = 50)]
    poll_ms: u64,
    /// Give up after this long (not in soak mode).
    #[arg(long, default_value_t = 600)]
    timeout_seconds: u64,
    /// The scheduler only polls (every --poll-ms) instead of also waking on NOTIFY.
    #[arg(long)]
    no_listen: bool,
    /// SQL run on the migrated scratch database before anything is submitted: a schema
    /// change priced without building it (BENCHMARKS.md "Method"), e.g. a constraint dropped.
    #[arg(long, value_name = "FILE", value_parser = read_sql_file)]
    setup_sql: Option<String>,
}

/// `--setup-sql`: the file's text, read before any database is touched.
fn read_sql_file(path: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))
}

/// The queue under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum QueueKind {
    Memory,
    Sqs,
}

impl QueueKind {
    pub fn name(self) -> &'static str {
        match self {
            QueueKind::Memory => "memory",
            QueueKind::Sqs => "sqs",
        }
    }
}

/// What a throughput run does with its steps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// Independent steps, all submitted before the loops start.
    Flat,
    /// Chains fanning in to one step, all submitted before the loops start.
    Dag,
    /// Flat steps submitted at this rate (steps/s) while the loops run.
    Rate(u32),
    /// Run this many minutes, keeping the queue topped up, or submitting at `rate`; with
    /// `prune_after`, the scheduler deletes finished runs older than that.
    Soak { minutes: u32, rate: Option<u32>, prune_after: Option<Duration> },
}

impl Mode {
    /// The report's `mode`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Flat => "flat",
            Mode::Dag => "dag",
            Mode::Rate(_) => "rate",
            Mode::Soak { .. } => "soak",
        }
    }

    /// Whether every step is submitted before the measurement starts.
    pub fn preloaded(self) -> bool {
        matches!(self, Mode::Flat | Mode::Dag)
    }

    /// The submission rate, steps/s, when steps are submitted at a steady rate.
    pub fn rate(self) -> Option<u32> {
        match self {
            Mode::Rate(rate) => Some(rate),
            Mode::Soak { rate, .. } => rate,
            Mode::Flat | Mode::Dag => None,
        }
    }

    /// How many minutes a soak runs.
    pub fn soak(self) -> Option<u32> {
        match self {
            Mode::Soak { minutes, .. } => Some(minutes),
            _ => None,
        }
    }

    /// The retention a soak gives the scheduler (`--prune-after`).
    pub fn prune_after(self) -> Option<Duration> {
        match self {
            Mode::Soak { prune_after, .. } => prune_after,
            _ => None,
        }
    }
}

/// What a throughput run was asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    pub mode: Mode,
    /// Steps to run (`flat`, `dag`) or submit (`rate`); unused by `soak`.
    pub steps: usize,
    pub batch: u32,
    /// Gathering time for batches above 10 messages (the event source's batching window).
    pub batching_window: Duration,
    pub executors: u32,
    pub queue: QueueKind,
    pub poll: Duration,
    pub timeout: Duration,
    /// Whether the scheduler wakes on `NOTIFY` (`false`: it only polls every `poll`).
    pub listen: bool,
    /// SQL run on the scratch database before the submission (`--setup-sql`).
    pub setup_sql: Option<String>,
}

impl Options {
    fn new(mode: Mode, steps: usize, run: RunArgs) -> Self {
        Options {
            mode,
            steps,
            batch: run.batch,
            batching_window: Duration::from_millis(run.batching_window_ms),
            executors: run.executors,
            queue: run.queue,
            poll: Duration::from_millis(run.poll_ms),
            timeout: Duration::from_secs(run.timeout_seconds),
            listen: !run.no_listen,
            setup_sql: run.setup_sql,
        }
    }
}

/// A run of any mode, as asked on the command line.
enum Plan {
    Throughput(Options),
    Scale(scale::Options),
    Backlog(backlog::Options),
}

impl From<ModeCommand> for Plan {
    fn from(mode: ModeCommand) -> Self {
        match mode {
            ModeCommand::Flat { steps, run } => Plan::Throughput(Options::new(Mode::Flat, steps, run)),
            ModeCommand::Dag { steps, run } => Plan::Throughput(Options::new(Mode::Dag, steps, run)),
            ModeCommand::Rate { rate, steps, run } => Plan::Throughput(Options::new(Mode::Rate(rate), steps, run)),
            ModeCommand::Soak { minutes, rate, prune_after, run } => {
                Plan::Throughput(Options::new(Mode::Soak { minutes, rate, prune_after }, 0, run))
            }
            ModeCommand::Scale { history, history_small } => {
                Plan::Scale(scale::Options { small: history_small, large: history.max(history_small) })
            }
            ModeCommand::Backlog {
                steps,
                sleep_seconds,
                executors,
                batch,
                lease_seconds,
                delivery_timeout_seconds,
                queue,
                timeout_seconds,
            } => Plan::Backlog(backlog::Options {
                steps,
                sleep_seconds,
                executors,
                batch,
                lease_seconds,
                delivery_timeout_seconds,
                queue,
                timeout: Duration::from_secs(timeout_seconds),
            }),
        }
    }
}

/// `--prune-after`: a whole number of seconds (`90s`), minutes (`2m`) or hours (`1h`), at
/// least [`minutes::MIN_PRUNE_AFTER`].
fn parse_prune_after(text: &str) -> Result<Duration, String> {
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unit_seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return Err(format!("`{text}` is not a duration: write a whole number and s, m or h (`90s`, `2m`)")),
    };
    let number: u64 = number.parse().map_err(|_| format!("`{text}` does not start with a whole number"))?;
    let duration = Duration::from_secs(number.saturating_mul(unit_seconds));
    let least = minutes::MIN_PRUNE_AFTER;
    if duration < least {
        return Err(format!(
            "{text} is too short: at least {}s, so that each minute's steps are read before they can be deleted",
            least.as_secs()
        ));
    }
    Ok(duration)
}

#[allow(clippy::large_enum_variant, reason = "one value per process, printed and dropped")]
enum Output {
    Throughput(Report),
    Scale(scale::Report),
    Backlog(backlog::Report),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("RARA_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .try_init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(bench(Plan::from(cli.mode), cli.json)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs one benchmark on a scratch database and prints its report.
async fn bench(plan: Plan, json: bool) -> anyhow::Result<()> {
    let scratch = ScratchDb::on_server_of_env("rara_bench").context("DATABASE_URL is not a Postgres URL")?;
    let admin = system::pool(&scratch.admin_options(), 1).await.context("cannot reach Postgres")?;
    let outcome = run(plan, &admin, &scratch).await;
    if let Err(e) = scratch.drop_database().await {
        eprintln!("warning: could not drop the scratch database {}: {e}", scratch.name);
    }
    admin.close().await;
    match (outcome?, json) {
        (Output::Throughput(report), true) => println!("{}", serde_json::to_string(&report)?),
        (Output::Throughput(report), false) => report::print(&report),
        (Output::Scale(report), true) => println!("{}", serde_json::to_string(&report)?),
        (Output::Scale(report), false) => scale::print(&report),
        (Output::Backlog(report), true) => println!("{}", serde_json::to_string(&report)?),
        (Output::Backlog(report), false) => backlog::print(&report),
    }
    Ok(())
}

async fn run(plan: Plan, admin: &sqlx::PgPool, scratch: &ScratchDb) -> anyhow::Result<Output> {
    scratch.create_migrated().await.context("cannot create and migrate the scratch database")?;
    match plan {
        Plan::Throughput(options) => throughput::run(&options, admin, scratch).await.map(Output::Throughput),
        Plan::Scale(options) => scale::run(options, scratch).await.map(Output::Scale),
        Plan::Backlog(options) => backlog::run(&options, scratch).await.map(Output::Backlog),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prune_after_reads_seconds_minutes_and_hours() {
        assert_eq!(parse_prune_after("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_prune_after("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_prune_after("1h"), Ok(Duration::from_secs(3600)));
    }

    #[test]
    fn prune_after_rejects_what_is_not_a_duration() {
        for text in ["", "90", "m", "2 m", "1.5m", "2min", "-90s", "2m30s"] {
            let error = parse_prune_after(text).expect_err(text);
            assert!(error.contains("not a duration") || error.contains("whole number"), "{text}: {error}");
        }
    }

    #[test]
    fn prune_after_rejects_a_retention_shorter_than_a_minute_and_its_reading() {
        let error = parse_prune_after("60s").expect_err("60s is shorter than 70s");
        assert!(error.contains("at least 70s"), "{error}");
        assert_eq!(parse_prune_after("70s"), Ok(minutes::MIN_PRUNE_AFTER));
    }

    #[test]
    fn soak_takes_its_retention_from_the_command_line() {
        let cli = Cli::try_parse_from(["rara-bench", "soak", "--minutes", "2", "--prune-after", "70s"]).unwrap();
        let Plan::Throughput(options) = Plan::from(cli.mode) else { panic!("soak is a throughput mode") };
        assert_eq!(options.mode.soak(), Some(2));
        assert_eq!(options.mode.prune_after(), Some(Duration::from_secs(70)));
        assert!(Cli::try_parse_from(["rara-bench", "soak", "--minutes", "2", "--prune-after", "1m"]).is_err());
    }
}
