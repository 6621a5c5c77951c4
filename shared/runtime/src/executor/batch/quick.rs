//! Quick steps (DESIGN.md "Quick steps"): before the ordinary claim, the batch's steps whose
//! in-process executor is [quick](rara_domain::executor::Executor::quick) are locked, run and
//! recorded in one transaction ([`rara_store::quick`]): one statement fewer to commit, no
//! claim written, the attempt written once. A batch whose messages all say that their steps
//! run no quick operation (the `rara_operations` attribute the scheduler sets) goes straight
//! to the claim, without the transaction of a lock that would find nothing. Whatever is left
//! goes through the ordinary claim: the steps that are not quick or could not be locked, a
//! quick step whose input takes references or secrets (resolved at claim), one that failed,
//! panicked or did not finish within [`QUICK_BOUND`] (it runs again under the claim, which
//! records its failure), and the whole batch when the transaction did not commit.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rara_domain::executor::{Detach, DiscardReporter, ExecutionContext};
use rara_domain::{references, secret_material};
use rara_queue::StepMessage;
use rara_store::claim::StaleReason;
use rara_store::quick::QuickStep;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::trace::{Attempt, AttemptTrace};
use super::{BatchExecutor, requests};
use crate::executor::fate::{Ack, BatchReport, Record};

/// How long a batch's quick steps may run, together, inside their transaction; one not done
/// by then is left to the ordinary claim.
pub const QUICK_BOUND: Duration = Duration::from_millis(50);

impl BatchExecutor {
    /// Runs and records the batch's quick steps; returns the messages left to the claim.
    pub(super) async fn quick(
        &self,
        valid: Vec<(Record, StepMessage)>,
        deadline: Instant,
        report: &mut BatchReport,
    ) -> Vec<(Record, StepMessage)> {
        if !valid.iter().any(|(record, _)| self.may_be_quick(record)) {
            return valid;
        }
        let lock_started = SystemTime::now();
        report.counters.quick_locks += 1;
        let mut batch = match self.db(self.env.store.quick_lock(&requests(&valid), &self.quick_operations)).await {
            Ok(batch) if !batch.steps.is_empty() => batch,
            Ok(_) => return valid,
            Err(e) => {
                tracing::warn!(error = %e, "could not lock the batch's quick steps; they are claimed as usual");
                return valid;
            }
        };
        let lock_ended = SystemTime::now();
        let steps = std::mem::take(&mut batch.steps);
        let outputs = self.run_quick(&steps, deadline.min(Instant::now() + QUICK_BOUND)).await;
        if outputs.is_empty() {
            // Nothing was written; the locks go before the claim asks for the same rows (if
            // the rollback fails, the dropped connection's does it).
            if let Err(e) = self.db(batch.rollback()).await {
                tracing::warn!(error = %e, "could not end the quick steps' transaction; its connection ends it");
            }
            return valid;
        }
        let record_started = SystemTime::now();
        let landed = match self.db(batch.succeed(&self.worker, &outputs)).await {
            Ok(landed) => landed,
            Err(e) => {
                // Not written, or (a commit whose answer was lost) not known to be: the claim
                // judges each step, and a step that did finish is stale to it.
                tracing::warn!(error = %e, "quick steps not known to be recorded; they are claimed as usual");
                return valid;
            }
        };
        let record_ended = SystemTime::now();
        let ran = record_started.duration_since(lock_ended).unwrap_or_default();
        let mut settled = HashSet::with_capacity(landed.len());
        let mut rest = Vec::with_capacity(valid.len() - landed.len().min(valid.len()));
        for (record, message) in valid {
            let Some(step) = steps.iter().find(|s| s.step_id == message.step_id && landed.contains(&s.step_id)) else {
                rest.push((record, message));
                continue;
            };
            if !settled.insert(step.step_id) {
                report.counters.stale += 1;
                report.acknowledge(record.message_id, Ack::Stale(StaleReason::DuplicateInBatch));
                continue;
            }
            report.counters.claimed += 1;
            report.counters.succeeded += 1;
            report.counters.quick += 1;
            if let Some(age) = record.sent_at.and_then(|sent| lock_started.duration_since(sent).ok()) {
                report.operations.queue_age(&step.operation, age);
            }
            report.operations.attempt(&step.operation, "Succeeded", ran);
            let attempt = Attempt {
                run_id: step.run_id,
                step_id: step.step_id,
                operation: &step.operation,
                attempt: step.attempt,
                fence: step.fence,
            };
            // The lock is the claim; the steps ran together between it and the record.
            if let Some(trace) = AttemptTrace::of(record.traceparent.as_deref(), attempt, lock_started) {
                trace.claim(lock_started, lock_ended);
                trace.execute(lock_ended, record_started);
                trace.finish("succeeded", record_started, record_ended);
            }
            tracing::debug!(step_id = %step.step_id, attempt = step.attempt, fence = step.fence, "quick step succeeded");
            report.acknowledge(record.message_id, Ack::Succeeded);
        }
        rest
    }

    /// Whether a message may name a quick step: yes, unless the registry has none or the
    /// message says the operations of its steps ([`rara_queue::operations`]) and none is
    /// quick. A batch of which no message may spends no transaction on the quick lock.
    fn may_be_quick(&self, record: &Record) -> bool {
        if self.quick_operations.is_empty() {
            return false;
        }
        match record.operations.as_deref().and_then(rara_queue::operations::decode) {
            Some(names) => names.iter().any(|name| self.quick_operations.iter().any(|quick| quick == name)),
            None => true,
        }
    }

    /// Runs the locked steps concurrently until `deadline`; returns those that succeeded with
    /// their outputs. A step whose input takes references or secrets does not run here.
    async fn run_quick<'a>(
        &self,
        steps: &'a [QuickStep],
        deadline: Instant,
    ) -> Vec<(&'a QuickStep, serde_json::Value)> {
        let mut running = JoinSet::new();
        for (i, step) in steps.iter().enumerate() {
            if !references::scan(&step.input).is_empty() || secret_material::has_reference(&step.input) {
                continue;
            }
            let Some(executor) = self.env.registry.in_process(&step.operation, step.version.as_deref()).cloned() else {
                continue;
            };
            let ctx = ExecutionContext {
                run_id: step.run_id,
                step_id: step.step_id,
                map_index: step.map_index,
                operation: step.operation.clone(),
                version: step.version.clone(),
                attempt: step.attempt,
                fence: step.fence,
                deadline,
                cancel: CancellationToken::new(),
                stop_reason: Default::default(),
                reporter: Arc::new(DiscardReporter),
                detach: Detach::new(None),
            };
            let input = step.input.clone();
            running.spawn(async move { (i, executor.execute(ctx, input).await) });
        }
        let mut outputs = Vec::with_capacity(running.len());
        let max_output_bytes = self.env.returns.max_output_bytes;
        // A panic is a task that did not succeed: the claim runs the step again and records it.
        let collect = async {
            while let Some(joined) = running.join_next().await {
                // An output beyond its bound is left to the claim, which records the failure.
                if let Ok((i, Ok(output))) = joined
                    && serde_json::to_vec(&output).is_ok_and(|b| b.len() <= max_output_bytes)
                {
                    outputs.push((&steps[i], output));
                }
            }
        };
        if tokio::time::timeout_at(deadline, collect).await.is_err() {
            running.abort_all();
        }
        outputs
    }
}
