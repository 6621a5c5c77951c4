//! Child workflows ([`rara_domain::workflow::child`], docs/src/guide/recover.md): the executor
//! that claims a child workflow step makes the child run and lets the step wait for it in one
//! transaction ([`Store::start_child`]), fenced like every write after the claim; the
//! scheduler's round of waits decides the wait once the child ends ([`Store::wait_round`]
//! calls [`Store::decide_children`]) and cancels the children whose parent step stopped
//! waiting for them ([`Store::cancel_children`]). Waiting costs a row in `waits`, nothing else.

use std::collections::HashSet;

use rara_domain::StepError;
use rara_domain::state::RunStatus;
use rara_domain::step_error::codes;
use rara_domain::workflow::Plan;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::bulk::cancel_locked;
use crate::detach::DetachedAttempt;
use crate::read::RunView;
use crate::submit::{Origin, submit_in};
use crate::{Error, Holder, Store, fence, sql};

/// A child run to make, and the step that waits for it (what an executor's claim of a child
/// workflow step ends with).
#[derive(Debug, Clone, PartialEq)]
pub struct ChildStart {
    pub holder: Holder,
    /// The child run, planned; its idempotency key is
    /// [`child_key`](rara_domain::workflow::child::child_key) of the holder's attempt.
    pub plan: Plan,
    /// The registered version it is a run of.
    pub version: i32,
}

/// The child run a claim made (or found, made by an earlier claim of the same attempt).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildStarted {
    pub run_id: Uuid,
    pub created: bool,
}

impl Store {
    /// How deep a child made by the step `step_id` would be (1: the step's run is no one's
    /// child), counted up to `limit + 1`.
    pub async fn child_depth(&self, step_id: Uuid, limit: u32) -> Result<u32, Error> {
        let limit = i32::try_from(limit).unwrap_or(i32::MAX);
        let depth = sqlx::query_file_scalar!("sql/child_depth.sql", step_id, limit).fetch_one(&self.pool).await?;
        Ok(u32::try_from(depth).unwrap_or(0))
    }

    /// Makes the child run of `start` and lets the step of its holder wait for it, in one
    /// transaction: a holder that lost its lease gets [`Error::LeaseLost`] and no child is made.
    pub async fn start_child(&self, start: &ChildStart) -> Result<ChildStarted, Error> {
        let (holder, plan) = (&start.holder, &start.plan);
        let mut tx = self.pool.begin().await?;
        let origin = Origin { workflow_version: Some(start.version), schedule: None, run_id: None };
        let submitted = submit_in(&mut tx, plan, None, origin).await?;
        let attempt: Option<i32> = sqlx::query_scalar(sql::CHILD_WAIT.as_str())
            .bind(holder.step_id)
            .bind(&holder.worker)
            .bind(holder.fence)
            .bind(submitted.run_id)
            .bind(&plan.name)
            .fetch_optional(&mut *tx)
            .await?;
        fence::expect_row(holder, attempt)?;
        tx.commit().await?;
        Ok(ChildStarted { run_id: submitted.run_id, created: submitted.created })
    }

    /// Decides up to `batch` child workflow waits whose child run ended: the step succeeds
    /// with the child's outputs ([`child_output`]) or fails with `CHILD_WORKFLOW_FAILED`. Each
    /// decision is conditional (nothing decided it yet), so two schedulers decide it once.
    /// Returns how many it decided; the round of waits applies them.
    pub async fn decide_children(&self, batch: i64) -> Result<usize, Error> {
        let ended = sqlx::query_file!("sql/children_ended.sql", batch).fetch_all(&self.pool).await?;
        let mut decided = 0;
        for row in ended {
            let by = format!("child {}", row.child_run_id);
            let completion = match row.status {
                RunStatus::Succeeded => match child_output(&self.run(row.child_run_id).await?) {
                    Ok(output) => json!({"by": by, "output": output}),
                    Err(error) => json!({"by": by, "error": error.to_json()}),
                },
                status => {
                    let child = self.run(row.child_run_id).await?;
                    json!({"by": by, "error": child_failure(&child, status).to_json()})
                }
            };
            let changed = sqlx::query_file!("sql/child_decide.sql", row.step_id, row.attempt, completion)
                .execute(&self.pool)
                .await?
                .rows_affected();
            decided += changed as usize;
        }
        Ok(decided)
    }

    /// Cancels those of `children` still running (their parent step no longer waits for them:
    /// cancelled, timed out, failed), locked in one transaction (another scheduler skips them).
    /// Returns the runs cancelled and their attempts that ran detached (for their executors to
    /// be told).
    pub async fn cancel_children(&self, children: &[Uuid]) -> Result<(Vec<Uuid>, Vec<DetachedAttempt>), Error> {
        if children.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let mut tx = self.pool.begin().await?;
        let runs: Vec<Uuid> =
            sqlx::query_file_scalar!("sql/children_running.sql", children).fetch_all(&mut *tx).await?;
        if runs.is_empty() {
            return Ok((runs, Vec::new()));
        }
        let error = StepError::permanent(codes::CANCELLED, "its parent step no longer waits for it")
            .with_details(json!({"cancelled": "parent"}));
        let detached = cancel_locked(&mut tx, &runs, &error).await?;
        tx.commit().await?;
        Ok((runs, detached))
    }
}

/// What a succeeded child gives its parent step: `{"run_id", "workflow", "status", "output"}`,
/// `output` being the child's declared output, or else the outputs of its last steps (those no
/// other step depends on) by name.
pub fn child_output(child: &RunView) -> Result<Value, StepError> {
    if let Some(error) = &child.output_error {
        return Err(StepError::permanent(
            codes::CHILD_WORKFLOW_FAILED,
            format!("child run {} succeeded but its output could not be resolved: {error}", child.id),
        )
        .with_details(json!({"run_id": child.id, "status": "succeeded"})));
    }
    let output = match &child.output {
        Some(output) => output.clone(),
        None => {
            let upstream: HashSet<&str> =
                child.steps.iter().flat_map(|s| s.depends_on.iter().map(String::as_str)).collect();
            let last = child.steps.iter().filter(|s| s.parent.is_none() && !upstream.contains(s.name.as_str()));
            Value::Object(last.map(|s| (s.name.clone(), s.output.clone().unwrap_or(Value::Null))).collect())
        }
    };
    let bytes = serde_json::to_vec(&output).map_or(usize::MAX, |bytes| bytes.len());
    if bytes > MAX_CHILD_OUTPUT_BYTES {
        return Err(StepError::permanent(
            codes::OUTPUT_TOO_LARGE,
            format!(
                "child run {} succeeded with an output of {bytes} bytes; a child gives its parent step at most \
                 {MAX_CHILD_OUTPUT_BYTES} (declare a smaller output, or pass large values as artifacts)",
                child.id
            ),
        )
        .with_details(
            json!({"field": "output", "bytes": bytes, "bound": MAX_CHILD_OUTPUT_BYTES, "run_id": child.id}),
        ));
    }
    Ok(json!({"run_id": child.id, "workflow": child.name, "status": "succeeded", "output": output}))
}

/// The largest output (serialised) a succeeded child gives its parent step: the default bound
/// of an executor's output (`RARA_MAX_OUTPUT_BYTES`), as for a signal's payload. Each of the
/// child's step outputs is bounded where it is recorded; a declared output that combines many
/// of them is bounded here, before it becomes the parent step's output.
pub const MAX_CHILD_OUTPUT_BYTES: usize = rara_domain::wait::MAX_PAYLOAD_BYTES;

/// Why a child that ended `status` (failed, cancelled) fails its parent step: its first failed
/// step, by position, named with its code.
fn child_failure(child: &RunView, status: RunStatus) -> StepError {
    let failed = child.steps.iter().find(|s| s.status == rara_domain::state::StepStatus::Failed);
    let cause =
        failed.and_then(|s| s.error.as_ref().map(|e| (s.name.as_str(), e.0.code.as_str(), e.0.message.as_str())));
    let message = match cause {
        Some((step, code, message)) => format!("child run {} {status}: step {step} {code}: {message}", child.id),
        None => format!("child run {} {status}", child.id),
    };
    StepError::permanent(codes::CHILD_WORKFLOW_FAILED, message).with_details(json!({
        "run_id": child.id,
        "workflow": child.name,
        "status": status.as_str(),
        "step": cause.map(|c| c.0),
        "code": cause.map(|c| c.1),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn succeeded_with(output: Value) -> RunView {
        serde_json::from_value(json!({
            "id": Uuid::nil(), "name": "eval-suite", "status": "succeeded", "idempotency_key": null,
            "inputs": {}, "output": output, "created_at": "2026-12-06T00:00:00Z", "finished_at": null,
            "steps": [],
        }))
        .unwrap()
    }

    #[test]
    fn a_child_output_beyond_the_bound_fails_the_parent_step_naming_sizes_never_the_value() {
        let within = succeeded_with(json!({"score": "x".repeat(1000)}));
        assert_eq!(child_output(&within).unwrap()["output"]["score"].as_str().map(str::len), Some(1000));
        // Many bounded step outputs combined in one declared output.
        let parts: Vec<String> = (0..5).map(|_| "y".repeat(MAX_CHILD_OUTPUT_BYTES / 4)).collect();
        let error = child_output(&succeeded_with(json!({"parts": parts}))).unwrap_err();
        assert_eq!((error.code.as_str(), error.retryable), (codes::OUTPUT_TOO_LARGE, false));
        assert_eq!(error.details["bound"].as_u64(), Some(MAX_CHILD_OUTPUT_BYTES as u64));
        assert!(error.details["bytes"].as_u64().unwrap() > MAX_CHILD_OUTPUT_BYTES as u64);
        assert!(!error.message.contains("yyyy") && !error.details.to_string().contains("yyyy"), "{error:?}");
    }
}
