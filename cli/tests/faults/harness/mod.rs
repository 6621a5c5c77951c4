//! The fault suite's harness: the runners as child processes, a scenario's stack, and what
//! a finished scenario checks.
//!
//! # Layout
//!
//! - `mod.rs`: the constants every scenario shares, the seed, signals, the workflow shapes.
//! - `runner.rs`: [`Runner`], one `rara scheduler` or `rara executor` child.
//! - `stack.rs`: [`Stack`], one scenario's database, queues and runners; spawning, submitting.
//! - `waits.rs`: the bounded waits for state and the database reads they use.
//! - `queue.rs`: the queue's depth and messages injected straight onto it.
//! - `finish.rs`: [`Stack::finish`] and [`Finished`]: stop, measure, check the history.
//! - `postgres.rs`: the Postgres server itself: its address, a peer in front of it, a restart.

mod finish;
mod postgres;
mod queue;
mod runner;
mod stack;
mod waits;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

pub use postgres::{restart_postgres, runners_through_a_postgres_peer};
pub use runner::Runner;
pub use stack::{POSTGRES, Stack};

pub const LEASE_SECONDS: u64 = 3;
/// The longest any scenario waits for its runs to finish.
pub const RUN_BOUND: Duration = Duration::from_secs(90);

pub fn target_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).parent().expect("target dir").to_path_buf()
}

pub fn seed(scenario: &str) -> u64 {
    let seed = std::env::var("RARA_FAULT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    println!("[{scenario}] seed {seed} (replay with RARA_FAULT_SEED={seed})");
    seed
}

pub fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).status().expect("run kill");
    assert!(status.success(), "kill -{sig} {pid}");
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `a` sleeps, then `b` (sleep) and `c` (fails its first attempt, retryable) run, then `d`.
    Diamond,
    /// One noop root and four noop dependents.
    FanOut,
    /// One step that sleeps 1.5 s.
    Sleeper,
    /// One step on the Python executor (`sleep` 1.0.0) that sleeps 5 to 8 s: longer than the
    /// executors' invocations in scenario 11, so it is parked and re-attached.
    Remote,
}
