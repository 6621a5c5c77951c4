//! Collecting a batch's executions as they finish: whatever finishes together (within
//! [`RECORD_WINDOW`] of the first) is judged and recorded together.

use std::collections::HashMap;
use std::sync::PoisonError;
use std::time::SystemTime;

use tokio::task::JoinSet;
use tokio::time::Instant;

use super::record::Finished;
use super::{BatchExecutor, InFlight, RECORD_WINDOW, panicked, trace};
use crate::executor::execution::Execution;
use crate::executor::fate::BatchReport;

impl BatchExecutor {
    /// Records outcomes as the steps finish, in micro-batches: whatever finished together (within
    /// [`RECORD_WINDOW`] of the first) is recorded together (one statement per kind of outcome).
    pub(super) async fn collect(
        &self,
        mut running: JoinSet<Execution>,
        mut in_flight: HashMap<tokio::task::Id, InFlight>,
        report: &mut BatchReport,
    ) {
        while let Some(first) = running.join_next_with_id().await {
            let mut joined = vec![first];
            // What finishes within RECORD_WINDOW of the first joins it: a batch of short steps
            // is one statement, not one per wave of completions (journal:
            // docs/benchmarks/journal/2026-12-04-after-this-rounds-cuts.md).
            let window = Instant::now() + RECORD_WINDOW;
            loop {
                while let Some(more) = running.try_join_next_with_id() {
                    joined.push(more);
                }
                if running.is_empty() {
                    break;
                }
                match tokio::time::timeout_at(window, running.join_next_with_id()).await {
                    Ok(Some(more)) => joined.push(more),
                    _ => break,
                }
            }
            let mut finished = Vec::with_capacity(joined.len());
            let mut traces = Vec::new();
            {
                // The lock is not held across the awaits below.
                let mut rng = self.jitter.lock().unwrap_or_else(PoisonError::into_inner);
                for result in joined {
                    let (id, execution) = match result {
                        Ok((id, execution)) => (id, execution),
                        Err(join) => {
                            report.counters.panicked += 1;
                            (join.id(), panicked(&join))
                        }
                    };
                    // Every task was registered when spawned; a missing one cannot be
                    // recorded and its record (if any) comes back.
                    let Some(InFlight { record, step, trace }) = in_flight.remove(&id) else { continue };
                    let verdict = crate::executor::fate::judge(execution, step.attempt, &self.policy(&step), &mut *rng);
                    let (label, metric) = trace::outcome(&verdict);
                    let ran = (chrono::Utc::now() - step.started_at).to_std().unwrap_or_default();
                    report.operations.attempt(&step.operation, metric, ran);
                    traces.extend(trace.map(|t| (t, label)));
                    finished.push(Finished {
                        record,
                        holder: step.holder.clone(),
                        attached_at: step.attached_at,
                        verdict,
                    });
                }
            }
            let started = SystemTime::now();
            self.record(finished, report).await;
            let ended = SystemTime::now();
            for (trace, outcome) in traces {
                trace.finish(outcome, started, ended);
            }
        }
    }
}
