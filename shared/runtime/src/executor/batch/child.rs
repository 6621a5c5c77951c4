//! Child workflow steps ([`rara_domain::workflow::child`]): a claimed step of the reserved
//! operation `workflow.run` runs no executor. Its task reads the registered workflow its input
//! names and plans the child run with the inputs given (references substituted at claim, like
//! any input's), keyed by [`child_key`] so that one attempt makes one child; then recording
//! makes the child and lets the step wait for it in one fenced transaction
//! ([`rara_store::Store::start_child`]). The step then holds nothing: no lease, no message, no
//! executor, until the scheduler ends its wait when the child ends.
//!
//! What fails the step (for good, as `CHILD_WORKFLOW_INVALID` or `CHILD_DEPTH_EXCEEDED`): a
//! workflow that is not registered, a definition that does not plan with the inputs given
//! (each problem at its field), nesting deeper than [`MAX_CHILD_DEPTH`]. A database that cannot
//! be read is retryable, as for any step.

use std::sync::Arc;

use rara_domain::StepError;
use rara_domain::config::Config;
use rara_domain::registry::Registry;
use rara_domain::step_error::codes;
use rara_domain::workflow::WorkflowDefinition;
use rara_domain::workflow::child::{ChildInput, MAX_CHILD_DEPTH, child_key};
use rara_store::Store;
use rara_store::children::ChildStart;
use rara_store::claim::ClaimedStep;

use super::BatchExecutor;
use crate::executor::execution::Execution;

impl BatchExecutor {
    /// Makes each child run and lets its step wait for it, each in its own transaction; one
    /// result per item, in order.
    pub(super) async fn start_children(&self, items: &[Box<ChildStart>]) -> Vec<Result<(), rara_store::Error>> {
        let mut results = Vec::with_capacity(items.len());
        for start in items {
            let started = self.db(self.env.store.start_child(start)).await;
            results.push(started.map(|_| ()));
        }
        results
    }
}

/// The child run `step` makes, planned; or how the step ends without one.
pub(super) async fn plan(store: &Store, config: &Config, registry: &Registry, step: &ClaimedStep) -> Execution {
    match planned(store, config, registry, step).await {
        Ok(start) => Execution::Child(Box::new(start)),
        Err(error) => Execution::Failed(error),
    }
}

async fn planned(
    store: &Store,
    config: &Config,
    registry: &Registry,
    step: &ClaimedStep,
) -> Result<ChildStart, StepError> {
    let invalid = |message: String| StepError::permanent(codes::CHILD_WORKFLOW_INVALID, message);
    let input = ChildInput::parse(&step.input).map_err(invalid)?;
    let depth = store.child_depth(step.holder.step_id, MAX_CHILD_DEPTH).await.map_err(unreadable)?;
    if depth > MAX_CHILD_DEPTH {
        return Err(StepError::permanent(
            codes::CHILD_DEPTH_EXCEEDED,
            format!("a child of this step would be nested {depth} deep; at most {MAX_CHILD_DEPTH} are allowed"),
        ));
    }
    let found = match store.definition(&input.workflow, input.version).await {
        Ok(found) => found,
        Err(e) if e.is_transient() => return Err(unreadable(e)),
        Err(e) => return Err(invalid(e.to_string())),
    };
    let shown = format!("{}@{}", found.name, found.version);
    let mut definition: WorkflowDefinition =
        serde_json::from_value(found.definition).map_err(|e| invalid(format!("{shown} does not read: {e}")))?;
    definition.idempotency_key = Some(child_key(step.holder.step_id, step.attempt));
    let in_process = |op: &str, v: Option<&str>| registry.in_process(op, v).is_some();
    let plan = definition
        .plan_for(config, &input.inputs, in_process)
        .map_err(|e| invalid(format!("{shown} does not plan with the inputs given: {e}")))?;
    Ok(ChildStart { holder: step.holder.clone(), plan, version: found.version })
}

/// The database could not be read: another attempt may.
fn unreadable(e: rara_store::Error) -> StepError {
    StepError::retryable(codes::INPUT_REFERENCE_UNAVAILABLE, format!("the child workflow could not be read: {e}"))
}

/// A claimed step's task when it runs a workflow.
pub(super) async fn task(
    store: Store,
    config: Arc<Config>,
    registry: Arc<Registry>,
    step: Arc<ClaimedStep>,
) -> Execution {
    plan(&store, &config, &registry, &step).await
}
