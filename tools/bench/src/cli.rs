//! The command line: the modes and their arguments, read into the [`Benchmark`] to run.

use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::options::{Mode, Operation, Options, QueueKind};
use crate::{backlog, minutes, scale};

#[derive(Debug, Parser)]
#[command(
    name = "rara-bench",
    version,
    about = "Benchmark rara: noop steps end to end on a scratch database of DATABASE_URL's server \
             (created, migrated and dropped)",
    long_about = None
)]
pub struct Cli {
    /// Print the report as one line of JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub mode: ModeCommand,
}

#[derive(Debug, Subcommand)]
pub enum ModeCommand {
    /// Independent noop steps, all submitted before the loops start: throughput behind a
    /// backlog, commits per step, due-to-claimed, CPU per 1000 steps, peak RSS, AWS cost.
    Flat {
        /// How many steps to run.
        #[arg(long, default_value_t = 20_000)]
        steps: usize,
        /// Their operation: `noop` (quick), `sleep` (0 s, the ordinary path) or `nothing` (the
        /// ordinary path with a step that returns at once).
        #[arg(long, value_enum, default_value_t = Operation::Noop)]
        operation: Operation,
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
pub struct RunArgs {
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

impl RunArgs {
    /// The options of a throughput run of `mode` over `steps` steps, with these arguments.
    fn options(self, mode: Mode, steps: usize) -> Options {
        let run = self;
        Options {
            mode,
            operation: Operation::Noop,
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

/// One benchmark of any mode, as asked on the command line.
pub enum Benchmark {
    Throughput(Options),
    Scale(scale::Options),
    Backlog(backlog::Options),
}

impl From<ModeCommand> for Benchmark {
    fn from(mode: ModeCommand) -> Self {
        match mode {
            ModeCommand::Flat { steps, operation, run } => {
                Benchmark::Throughput(Options { operation, ..run.options(Mode::Flat, steps) })
            }
            ModeCommand::Dag { steps, run } => Benchmark::Throughput(run.options(Mode::Dag, steps)),
            ModeCommand::Rate { rate, steps, run } => Benchmark::Throughput(run.options(Mode::Rate(rate), steps)),
            ModeCommand::Soak { minutes, rate, prune_after, run } => {
                Benchmark::Throughput(run.options(Mode::Soak { minutes, rate, prune_after }, 0))
            }
            ModeCommand::Scale { history, history_small } => {
                Benchmark::Scale(scale::Options { small: history_small, large: history.max(history_small) })
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
            } => Benchmark::Backlog(backlog::Options {
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
        let Benchmark::Throughput(options) = Benchmark::from(cli.mode) else { panic!("soak is a throughput mode") };
        assert_eq!(options.mode.soak(), Some(2));
        assert_eq!(options.mode.prune_after(), Some(Duration::from_secs(70)));
        assert!(Cli::try_parse_from(["rara-bench", "soak", "--minutes", "2", "--prune-after", "1m"]).is_err());
    }
}
