//! What a throughput run is asked to do: its [`Mode`], its [`Options`] and the [`QueueKind`]
//! under test.

use std::time::Duration;

use clap::ValueEnum;

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

/// The operation of a flat run's steps (`--operation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Operation {
    /// `noop`: a quick in-process step, run and recorded inside the claim's transaction
    /// (DESIGN.md "Quick steps").
    Noop,
    /// `sleep` for 0 s: an in-process step that is not quick, on the ordinary path (claim,
    /// execute, outcome), as `http.request` and remote steps are.
    Sleep,
    /// `bench.nothing` (`workload::Nothing`): an in-process step that is not quick and
    /// returns at once, on the ordinary path with nothing of its own (`sleep 0` waits for the
    /// runtime's next timer tick): what the path itself costs.
    Nothing,
}

impl Operation {
    /// The report's `operation`.
    pub fn name(self) -> &'static str {
        match self {
            Operation::Noop => "noop",
            Operation::Sleep => "sleep 0",
            Operation::Nothing => "nothing (ordinary)",
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
    /// The operation of the steps (flat runs; the others run `noop`).
    pub operation: Operation,
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
