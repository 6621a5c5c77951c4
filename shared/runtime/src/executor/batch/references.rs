//! Data flow at claim (DESIGN.md "Data flow"): the claimed steps whose input holds references
//! (`$output`, `$artifact`, `$input`; see [`rara_domain::references`]) get them substituted
//! before they are spawned. One statement reads what the whole batch needs, one fenced
//! statement records on each attempt the input it runs with; a batch without references pays
//! neither. Secret references stay references, for the execution to resolve (`execution.rs`);
//! a `$secret` inside a value brought in is escaped, never resolved.
//!
//! A claim that re-attaches to a detached remote attempt is left alone: that attempt's input
//! was substituted and recorded when it started.
//!
//! A map step's claims (`for_each`) read in the same statement and run nothing: the first
//! resolves the list and ends as [`Execution::Expanded`] (one child per element, the map's
//! input substituted whole, `$item` by the element; recorded fenced, `map.rs` of the store);
//! the second, once every child succeeded, ends as a success whose output is the list of their
//! outputs. A map child's own claim substitutes nothing: its input is already whole.
//!
//! A step that must not run ends at once, through the normal outcome path:
//! - a reference finds nothing: a permanent `INPUT_REFERENCE_MISSING` naming the field, the
//!   upstream step and the pointer (never a value);
//! - the resolved input exceeds `RARA_MAX_INPUT_BYTES`: a permanent `INVALID_INPUT`;
//! - a map's children's outputs total more than `RARA_MAX_GATHERED_BYTES` (measured in
//!   Postgres, before any is read): a permanent `OUTPUT_TOO_LARGE` (`map.rs`);
//! - the values could not be read or the input not recorded (database trouble): a retryable
//!   `INPUT_REFERENCE_UNAVAILABLE`;
//! - its lease was lost before the input was recorded: nothing more is written.

use std::collections::HashMap;

use rara_domain::StepError;
use rara_domain::references;
use rara_domain::step_error::codes;
use rara_store::Holder;
use rara_store::claim::{ClaimOutcome, ClaimedStep};
use rara_store::references::{Needs, Upstream};
use serde_json::Value;
use tokio::task::JoinSet;
use tracing::Instrument;
use uuid::Uuid;

use super::{BatchExecutor, map};
use crate::executor::execution::Execution;

/// The claimed steps whose inputs hold references, the map steps to end, and what their
/// references need.
#[derive(Default)]
struct Gathered<'a> {
    needs: Needs,
    steps: Vec<&'a mut ClaimedStep>,
    maps: Vec<&'a ClaimedStep>,
}

impl<'a> Gathered<'a> {
    fn of(outcomes: &'a mut [ClaimOutcome]) -> Self {
        let mut gathered = Gathered::default();
        for outcome in outcomes.iter_mut() {
            let ClaimOutcome::Claimed(step) = outcome else { continue };
            // A re-attached attempt resumes where it runs: its input was substituted and
            // recorded when the attempt started.
            // A map child's input was substituted whole when its map was expanded.
            if step.resume.is_some() || step.map_index.is_some() {
                continue;
            }
            if let Some(map) = &step.map {
                // A gathering's needs wait until its total is known to be within its bound.
                if !map::gathers(map) {
                    map::add_needs(step, map, &mut gathered.needs);
                }
                gathered.maps.push(step);
                continue;
            }
            let found: Vec<_> = references::scan(&step.input).into_iter().filter_map(|f| f.reference.ok()).collect();
            if found.is_empty() {
                continue;
            }
            for reference in &found {
                gathered.needs.add(step.run_id, reference);
            }
            gathered.steps.push(step);
        }
        gathered
    }
}

impl BatchExecutor {
    /// Substitutes the references of the claimed steps' inputs in place. Returns how the
    /// executions of the steps that must not run end, by step id.
    pub(super) async fn substitute_references(&self, outcomes: &mut [ClaimOutcome]) -> HashMap<Uuid, Execution> {
        let mut ended = HashMap::new();
        let Gathered { mut needs, steps, maps } = Gathered::of(outcomes);
        if steps.is_empty() && maps.is_empty() {
            return ended;
        }
        let maps = self.bound_gatherings(maps, &mut needs, &mut ended).await;

        let mut upstream = if needs.is_empty() {
            Upstream::default()
        } else {
            match self.db(self.env.store.references(&needs)).await {
                Ok(upstream) => upstream,
                Err(e) => {
                    tracing::error!(error = %e, steps = steps.len() + maps.len(), "could not read what the inputs' references need");
                    for id in steps.iter().map(|s| s.holder.step_id).chain(maps.iter().map(|s| s.holder.step_id)) {
                        ended.insert(id, unavailable("could not be read"));
                    }
                    return ended;
                }
            }
        };
        self.load_stored_inputs(&steps, &maps, &mut upstream, &mut ended).await;
        for step in maps {
            if ended.contains_key(&step.holder.step_id) {
                continue;
            }
            if let Some(map) = &step.map {
                let execution = map::end(step, map, &upstream.of_run(step.run_id), self.max_input_bytes);
                ended.insert(step.holder.step_id, execution);
            }
        }
        self.load_stored(&steps, &mut upstream, &mut ended).await;
        let steps = steps.into_iter().filter(|s| !ended.contains_key(&s.holder.step_id)).collect();
        let (resolved, items) = self.substitute_each(steps, &upstream, &mut ended);
        if !items.is_empty() {
            self.record_inputs(resolved, items, &mut ended).await;
        }
        ended
    }

    /// Each step's input with its references substituted (with the steps), or how the step
    /// ends without running (in `ended`): a reference that found nothing, an input too large.
    fn substitute_each<'a>(
        &self,
        steps: Vec<&'a mut ClaimedStep>,
        upstream: &Upstream,
        ended: &mut HashMap<Uuid, Execution>,
    ) -> (Vec<&'a mut ClaimedStep>, Vec<(Holder, Value)>) {
        let mut resolved = Vec::with_capacity(steps.len());
        let mut items = Vec::with_capacity(steps.len());
        for step in steps {
            let id = step.holder.step_id;
            match references::substitute(&step.input, &upstream.of_run(step.run_id)) {
                Ok(input) => {
                    let bytes = input.to_string().len();
                    if bytes > self.max_input_bytes {
                        tracing::warn!(step_id = %id, bytes, "the resolved input is too large; the step fails without running");
                        let error = StepError::permanent(
                            codes::INVALID_INPUT,
                            format!(
                                "the input with its references substituted is {bytes} bytes; at most {} are allowed (RARA_MAX_INPUT_BYTES)",
                                self.max_input_bytes
                            ),
                        );
                        ended.insert(id, Execution::Failed(error));
                        continue;
                    }
                    items.push((step.holder.clone(), input));
                    resolved.push(step);
                }
                Err(missing) => {
                    tracing::warn!(step_id = %id, field = %missing.field, step = missing.step.as_deref().unwrap_or(""), "a reference in the step's input found nothing; the step fails without running");
                    ended.insert(id, Execution::Failed(missing.to_step_error()));
                }
            }
        }
        (resolved, items)
    }

    /// Records the substituted inputs (fenced) and puts them in place; a step whose input
    /// could not be recorded ends without running (in `ended`).
    async fn record_inputs(
        &self,
        resolved: Vec<&mut ClaimedStep>,
        items: Vec<(Holder, Value)>,
        ended: &mut HashMap<Uuid, Execution>,
    ) {
        let results = match self.db(self.env.store.record_inputs(&items)).await {
            Ok(results) => results,
            Err(e) => {
                tracing::error!(error = %e, "could not record the resolved inputs");
                for step in resolved {
                    ended.insert(step.holder.step_id, unavailable("could not be recorded"));
                }
                return;
            }
        };
        for ((step, (_, input)), result) in resolved.into_iter().zip(items).zip(results) {
            match result {
                Ok(()) => step.input = input,
                Err(rara_store::Error::LeaseLost { .. }) => {
                    ended.insert(step.holder.step_id, Execution::LeaseLost);
                }
                Err(e) => {
                    tracing::error!(error = %e, step_id = %step.holder.step_id, "could not record the resolved input");
                    ended.insert(step.holder.step_id, unavailable("could not be recorded"));
                }
            }
        }
    }
}

pub(super) fn unavailable(what: &str) -> Execution {
    Execution::Failed(StepError::retryable(
        codes::INPUT_REFERENCE_UNAVAILABLE,
        format!("the values the input references {what} (database trouble); another attempt may"),
    ))
}

/// Spawns a claimed step's execution that ended before it ran, so it is recorded like any other.
pub(super) fn spawn_ended(
    running: &mut JoinSet<Execution>,
    step: &ClaimedStep,
    execution: Execution,
) -> tokio::task::Id {
    running.spawn(async move { execution }.instrument(super::step_span(step))).id()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use rara_domain::registry::Registry;
    use rara_queue::memory::MemoryQueue;
    use rara_store::Store;
    use rara_store::claim::StaleReason;
    use serde_json::json;

    use super::*;
    use crate::settings::Settings;

    /// An executor whose store cannot be reached: any statement it ran would fail.
    fn unreachable_store() -> BatchExecutor {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .acquire_timeout(Duration::from_millis(300))
            .connect_lazy("postgres://nobody@127.0.0.1:1/none")
            .unwrap();
        let settings = Settings::from_lookup("test", |k| (k == "RARA_QUEUE_URL").then(|| "memory".to_owned())).unwrap();
        let queue = Arc::new(MemoryQueue::new(Duration::from_secs(30), 10));
        BatchExecutor::new(Store::new(pool), queue, Arc::new(Registry::new()), &settings)
    }

    fn claimed(input: serde_json::Value) -> ClaimOutcome {
        ClaimOutcome::Claimed(Box::new(super::super::test_claim("s", "noop", input)))
    }

    #[tokio::test]
    async fn a_batch_without_references_runs_no_statement_and_keeps_its_inputs() {
        let executor = unreachable_store();
        // Secret references, malformed references (refused at submit) and look-alike strings
        // are not references.
        let inputs = [json!({"key": {"$secret": "api"}}), json!({"bad": {"$output": 1}, "s": "$output"}), json!({})];
        let mut outcomes: Vec<ClaimOutcome> = inputs.iter().cloned().map(claimed).collect();
        outcomes.push(ClaimOutcome::Stale(StaleReason::Finished));
        let before = outcomes.clone();
        let ended = executor.substitute_references(&mut outcomes).await;
        assert!(ended.is_empty(), "{ended:?}");
        assert_eq!(outcomes, before);
    }

    #[tokio::test]
    async fn references_that_cannot_be_read_end_the_step_as_a_retryable_failure() {
        let executor = unreachable_store();
        let mut outcomes = vec![claimed(json!({"a": {"$output": "fetch"}})), claimed(json!({}))];
        let ended = executor.substitute_references(&mut outcomes).await;
        assert_eq!(ended.len(), 1, "{ended:?}");
        let Some(Execution::Failed(error)) = ended.values().next() else { panic!("{ended:?}") };
        assert_eq!((error.code.as_str(), error.retryable), (codes::INPUT_REFERENCE_UNAVAILABLE, true));
    }
}
