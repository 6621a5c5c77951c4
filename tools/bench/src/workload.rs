//! The steps a run submits: flat runs of about a thousand noop steps, DAG units (chains of 5
//! steps fanning in to one step) or `sleep` steps (`backlog`), and the submitter that feeds
//! `rate` and `soak`; and the bench's registry, with [`Nothing`] beside the executor function's.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rara_domain::StepError;
use rara_domain::executor::{ExecutionContext, Executor};
use rara_domain::registry::Registry;
use rara_domain::workflow::{StepDefinition, WorkflowDefinition};
use rara_runtime::registry::standard_registry;
use rara_runtime::settings::Settings;
use rara_store::Store;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::counted::{Instants, QueueStats};
use crate::options::Operation;

/// Steps per submitted run (flat mode).
pub const RUN_SIZE: usize = 1000;
/// A DAG unit is CHAINS chains of CHAIN_LENGTH steps, all feeding one fan-in step.
const CHAINS: usize = 4;
const CHAIN_LENGTH: usize = 5;
const UNIT: usize = CHAINS * CHAIN_LENGTH + 1;
/// Soak mode keeps at most this many steps submitted and unfinished.
const SOAK_BACKLOG: u64 = 5000;

fn noop(name: String, depends_on: Vec<String>) -> StepDefinition {
    step(name, "noop", serde_json::json!({}), depends_on)
}

fn step(name: String, operation: &str, input: serde_json::Value, depends_on: Vec<String>) -> StepDefinition {
    StepDefinition {
        name,
        operation: operation.into(),
        version: None,
        input,
        depends_on,
        max_attempts: None,
        ..Default::default()
    }
}

/// About `steps` independent steps of `operation` in runs of [`RUN_SIZE`].
pub fn flat(steps: usize, operation: Operation) -> Vec<WorkflowDefinition> {
    independent(steps, "bench", |i| match operation {
        Operation::Noop => noop(format!("s{i}"), vec![]),
        Operation::Sleep => step(format!("s{i}"), "sleep", serde_json::json!({ "seconds": 0 }), vec![]),
        Operation::Nothing => step(format!("s{i}"), NOTHING, serde_json::json!({}), vec![]),
    })
}

/// The operation of [`Nothing`].
pub const NOTHING: &str = "bench.nothing";

/// An in-process executor that is not quick and returns `{}` at once (`--operation nothing`):
/// its steps take the ordinary path (claim, execute, outcome) and spend nothing of their own.
#[derive(Debug, Clone, Copy)]
pub struct Nothing;

#[async_trait::async_trait]
impl Executor for Nothing {
    async fn execute(&self, _ctx: ExecutionContext, _input: serde_json::Value) -> Result<serde_json::Value, StepError> {
        Ok(serde_json::json!({}))
    }
}

/// The executor function's registry ([`standard_registry`]) with [`Nothing`] added.
pub async fn registry(settings: &Settings) -> anyhow::Result<Arc<Registry>> {
    let mut registry = standard_registry(settings).await?;
    registry.register(NOTHING, Nothing)?;
    Ok(Arc::new(registry))
}

/// `steps` independent steps of the built-in `sleep`, each for `seconds`, in runs of [`RUN_SIZE`].
pub fn sleeping(steps: usize, seconds: f64) -> Vec<WorkflowDefinition> {
    independent(steps, "bench-backlog", |i| {
        step(format!("s{i}"), "sleep", serde_json::json!({ "seconds": seconds }), vec![])
    })
}

/// `steps` steps made by `make` (from their index in the run), in runs of [`RUN_SIZE`].
fn independent(steps: usize, name: &str, make: impl Fn(usize) -> StepDefinition) -> Vec<WorkflowDefinition> {
    let mut runs = Vec::new();
    let mut left = steps;
    while left > 0 {
        let n = left.min(RUN_SIZE);
        left -= n;
        let defs = (0..n).map(&make).collect();
        runs.push(WorkflowDefinition {
            name: name.into(),
            idempotency_key: None,
            inputs: Default::default(),
            output: None,
            timeout_seconds: None,
            steps: defs,
        });
    }
    runs
}

/// At least `steps` noop steps in DAG units, as many whole units per run as fit in [`RUN_SIZE`].
pub fn dag(steps: usize) -> Vec<WorkflowDefinition> {
    let units = steps.div_ceil(UNIT);
    let per_run = RUN_SIZE / UNIT;
    let mut runs = Vec::new();
    for first in (0..units).step_by(per_run) {
        let mut defs = Vec::new();
        for u in first..(first + per_run).min(units) {
            for c in 0..CHAINS {
                for i in 0..CHAIN_LENGTH {
                    let deps = if i == 0 { vec![] } else { vec![format!("u{u}c{c}s{}", i - 1)] };
                    defs.push(noop(format!("u{u}c{c}s{i}"), deps));
                }
            }
            let ends = (0..CHAINS).map(|c| format!("u{u}c{c}s{}", CHAIN_LENGTH - 1)).collect();
            defs.push(noop(format!("u{u}join"), ends));
        }
        runs.push(WorkflowDefinition {
            name: "bench-dag".into(),
            idempotency_key: None,
            inputs: Default::default(),
            output: None,
            timeout_seconds: None,
            steps: defs,
        });
    }
    runs
}

/// Submits `runs` and returns how many steps they hold; with `due_at`, records for each run
/// the instant before its submission started (its steps are due from the commit, a little
/// later: the latency measured from this instant includes the submission itself).
pub async fn submit_all(
    store: &Store,
    settings: &Settings,
    runs: &[WorkflowDefinition],
    due_at: Option<&Instants>,
) -> anyhow::Result<u64> {
    let mut total = 0;
    for run in runs {
        let plan = run.plan(&settings.core)?;
        total += plan.steps.len() as u64;
        let before = Instant::now();
        let submitted = store.submit(&plan).await?;
        if let Some(Ok(mut map)) = due_at.map(|m| m.lock()) {
            map.insert(submitted.run_id, before);
        }
    }
    Ok(total)
}

/// Submits while the loops run: at `rate` steps/s (a run of rate/20 flat steps every 50 ms)
/// until `target` steps are submitted, or, without a rate, keeping at most [`SOAK_BACKLOG`]
/// steps submitted and not yet deleted from the queue, until `stop`.
#[derive(Debug)]
pub struct Submitter {
    pub store: Store,
    pub settings: Arc<Settings>,
    pub rate: Option<u32>,
    pub target: u64,
    pub submitted: Arc<AtomicU64>,
    pub stats: Arc<QueueStats>,
    /// Where a steady-rate submitter records when each run's submission started.
    pub due_at: Arc<Instants>,
    pub stop: CancellationToken,
}

impl Submitter {
    pub async fn run(self) -> anyhow::Result<()> {
        match self.rate {
            Some(rate) => self.at_rate(rate).await,
            None => self.topping_up().await,
        }
    }

    async fn at_rate(self, rate: u32) -> anyhow::Result<()> {
        let run = flat((rate as usize / 20).clamp(1, RUN_SIZE), Operation::Noop);
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        while !self.stop.is_cancelled() && self.submitted.load(Ordering::Relaxed) < self.target {
            tick.tick().await;
            let n = submit_all(&self.store, &self.settings, &run, Some(&self.due_at)).await?;
            self.submitted.fetch_add(n, Ordering::Relaxed);
        }
        Ok(())
    }

    async fn topping_up(self) -> anyhow::Result<()> {
        let run = flat(RUN_SIZE, Operation::Noop);
        while !self.stop.is_cancelled() {
            let done = self.stats.steps_deleted.load(Ordering::Relaxed);
            if self.submitted.load(Ordering::Relaxed).saturating_sub(done) < SOAK_BACKLOG {
                let n = submit_all(&self.store, &self.settings, &run, None).await?;
                self.submitted.fetch_add(n, Ordering::Relaxed);
            } else {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_runs_hold_exactly_the_steps_asked_for() {
        let runs = flat(2500, Operation::Noop);
        assert_eq!(runs.iter().map(|r| r.steps.len()).collect::<Vec<_>>(), [1000, 1000, 500]);
    }

    #[tokio::test]
    async fn nothing_steps_are_registered_and_not_quick() {
        let runs = flat(3, Operation::Nothing);
        assert!(runs[0].steps.iter().all(|s| s.operation == NOTHING));
        let settings = crate::throughput::settings("bench", "memory://rara-bench", None, &[]).unwrap();
        let registry = registry(&settings).await.unwrap();
        let nothing = registry.in_process(NOTHING, None).expect("registered");
        // Not quick: a quick step would run inside its claim's transaction, not on the path
        // this operation prices.
        assert!(!nothing.quick());
        assert!(!registry.quick_names().contains(&NOTHING));
        assert!(registry.quick_names().contains(&"noop"));
    }

    #[test]
    fn sleeping_runs_sleep_for_the_seconds_asked_for() {
        let runs = sleeping(1200, 0.5);
        assert_eq!(runs.iter().map(|r| r.steps.len()).collect::<Vec<_>>(), [1000, 200]);
        assert_eq!(runs[1].steps[0].operation, "sleep");
        assert_eq!(runs[1].steps[0].input, serde_json::json!({ "seconds": 0.5 }));
    }

    #[test]
    fn dag_runs_hold_whole_units_of_chains_and_a_join() {
        let runs = dag(100);
        let steps: usize = runs.iter().map(|r| r.steps.len()).sum();
        assert_eq!(steps, 5 * UNIT, "100 steps round up to 5 units of 21");
        let join = runs[0].steps.iter().find(|s| s.name == "u0join").map(|s| s.depends_on.len());
        assert_eq!(join, Some(CHAINS));
    }
}
