//! Rerun from a step (docs/src/guide/recover.md): a new run made from a finished one, in which
//! the step named and everything downstream of it run again and every other step is *carried
//! over*: not run, `succeeded` with the original's output, its attempts and artifacts read from
//! the original step. The two runs are linked both ways (`workflow_runs.rerun_of`).
//!
//! The rerun copies the original's steps as stored (the run keeps no definition): operations,
//! inputs with their references, retries, maps, flow keys and waits. Its inputs are the
//! original's with the given ones replaced; a carried step that read a run input which changed
//! (a `$input` in its input or its map's list) would keep an output made from the old value,
//! so the rerun is refused naming it, unless forced.

use std::collections::{HashMap, HashSet};

use rara_domain::references::{Reference, scan};
use rara_domain::state::{RunStatus, StepStatus};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::browse::RunFilter;

mod version;
use crate::{DUE_CHANNEL, Error, Store};

/// What to rerun.
#[derive(Debug, Clone, Default)]
pub struct RerunRequest {
    /// The step to run again, with everything downstream of it (`None`: every step, a replay).
    pub from: Option<String>,
    /// The new run's idempotency key: when a run has it already, that run is the answer and
    /// nothing is made (a replay's `replay:<original id>`).
    pub idempotency_key: Option<String>,
    /// Run inputs that replace the original's (by top-level key).
    pub inputs: Map<String, Value>,
    /// Rerun even when a carried step read a run input that changed.
    pub force: bool,
    /// A registered version to make the rerun from instead of the original's steps
    /// (`--workflow NAME@VERSION`): planned with the rerun's inputs; its steps upstream of
    /// `from` must be the original's unchanged (`rerun/version.rs`).
    pub version: Option<NewVersion>,
}

/// The definition a rerun is made from (see [`RerunRequest::version`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NewVersion {
    /// The registered definition, planned with the rerun's inputs (the original's with the
    /// given ones replaced).
    pub plan: rara_domain::workflow::Plan,
    pub version: i32,
}

/// A rerun made.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Rerun {
    pub run_id: Uuid,
    /// `false`: the idempotency key named this run, made before; nothing was made now.
    pub created: bool,
    pub rerun_of: Uuid,
    /// The steps carried over, in definition order.
    pub carried: Vec<String>,
    /// The steps that run again, in definition order.
    pub rerun: Vec<String>,
}

/// A run a bulk replay may replay (`replay_candidates.sql`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayCandidate {
    pub run_id: Uuid,
    /// A run holds the key `replay:<run id>` already.
    pub replayed: bool,
    /// Its first failed step in definition order.
    pub first_failed: Option<String>,
}

/// The idempotency key of the replay of `run_id`: one replay per run, however often asked.
pub fn replay_key(run_id: Uuid) -> String {
    format!("replay:{run_id}")
}

/// A step of the original, as `rerun_steps_of.sql` reads it.
pub(crate) struct Original {
    pub(crate) id: Uuid,
    pub(crate) name: String,
    status: StepStatus,
    pub(crate) input: Value,
    for_each: Option<Value>,
    pub(crate) operation: String,
    pub(crate) version: Option<String>,
    pub(crate) depends_on: Vec<Uuid>,
}

impl Store {
    /// Makes a rerun of `run_id` from `request.from` (see the module). Refused
    /// ([`Error::RerunRefused`]) when the step is not one of the run's, when a step that would
    /// be carried over did not succeed (it is not downstream of the step: rerun from it), or
    /// when a carried step read a run input that changes and the request is not forced.
    pub async fn rerun(&self, run_id: Uuid, request: &RerunRequest) -> Result<Rerun, Error> {
        let mut tx = self.pool.begin().await?;
        let run = sqlx::query_file!("sql/read_run.sql", run_id)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(Error::RunNotFound(run_id))?;
        let steps: Vec<Original> = sqlx::query_file!("sql/rerun_steps_of.sql", run_id)
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .map(|r| Original {
                id: r.id,
                name: r.name,
                status: r.status,
                input: r.input,
                for_each: r.for_each,
                operation: r.operation,
                version: r.version,
                depends_on: r.depends_on,
            })
            .collect();
        let again = match &request.from {
            Some(from) => downstream(&steps, from)?,
            None => steps.iter().map(|s| s.id).collect(),
        };
        let mut inputs = run.inputs.clone();
        if let Some(object) = inputs.as_object_mut() {
            object.extend(request.inputs.clone());
        }
        refuse_carried(&steps, &again, &run.inputs, &inputs, request)?;
        if let Some(version) = &request.version {
            let made = version::make(&mut tx, run_id, &steps, &again, version, request).await?;
            tx.commit().await?;
            return Ok(made);
        }
        let new_id = Uuid::now_v7();
        let total = steps.len() as i32;
        let key = request.idempotency_key.as_deref();
        let made =
            sqlx::query_file_scalar!("sql/rerun_run.sql", new_id, run_id, total, again.len() as i32, &inputs, key)
                .fetch_optional(&mut *tx)
                .await?;
        if made.is_none() {
            let existing = sqlx::query_file!("sql/run_by_key.sql", key, &inputs).fetch_one(&mut *tx).await?;
            let names = |carried: bool| {
                steps.iter().filter(|s| again.contains(&s.id) != carried).map(|s| s.name.clone()).collect()
            };
            return Ok(Rerun {
                run_id: existing.id,
                created: false,
                rerun_of: run_id,
                carried: names(true),
                rerun: names(false),
            });
        }
        let old: Vec<Uuid> = steps.iter().map(|s| s.id).collect();
        let new: Vec<Uuid> = steps.iter().map(|_| Uuid::now_v7()).collect();
        let carried: Vec<bool> = steps.iter().map(|s| !again.contains(&s.id)).collect();
        let pending: Vec<i32> =
            steps.iter().map(|s| s.depends_on.iter().filter(|d| again.contains(d)).count() as i32).collect();
        sqlx::query_file!("sql/rerun_steps.sql", new_id, &old, &new, &carried, &pending).execute(&mut *tx).await?;
        sqlx::query_file!("sql/notify_due.sql", DUE_CHANNEL).execute(&mut *tx).await?;
        tx.commit().await?;
        let (carried, rerun): (Vec<&Original>, Vec<&Original>) = steps.iter().partition(|s| !again.contains(&s.id));
        let names = |steps: Vec<&Original>| steps.into_iter().map(|s| s.name.clone()).collect();
        Ok(Rerun { run_id: new_id, created: true, rerun_of: run_id, carried: names(carried), rerun: names(rerun) })
    }
}

impl Store {
    /// The finished runs `filter` matches, oldest first, at most `limit` (see
    /// [`ReplayCandidate`]).
    pub async fn replay_candidates(&self, filter: &RunFilter, limit: u32) -> Result<Vec<ReplayCandidate>, Error> {
        Ok(sqlx::query_file!(
            "sql/replay_candidates.sql",
            filter.status as Option<RunStatus>,
            filter.name.as_deref(),
            filter.created_after,
            filter.created_before,
            i64::from(limit),
            filter.version,
            filter.error_code.as_deref(),
            filter.inputs.as_ref(),
        )
        .fetch_all(&self.pool)
        .await?
        .into_iter()
        .map(|r| ReplayCandidate { run_id: r.id, replayed: r.replayed, first_failed: r.first_failed })
        .collect())
    }
}

/// Why the steps `steps` not in `again` cannot be carried over, if they cannot: one that did not
/// succeed, or (unless forced) one that read a run input that changes from `before` to `after`.
fn refuse_carried(
    steps: &[Original],
    again: &HashSet<Uuid>,
    before: &Value,
    after: &Value,
    request: &RerunRequest,
) -> Result<(), Error> {
    for step in steps.iter().filter(|s| !again.contains(&s.id)) {
        if step.status != StepStatus::Succeeded {
            return Err(Error::RerunRefused(format!(
                "step {:?} is {} and is not downstream of {:?}: it would be carried over without an output \
                     (rerun from {:?}, or from a step upstream of both)",
                step.name,
                step.status,
                request.from.as_deref().unwrap_or_default(),
                step.name
            )));
        }
        if let Some(pointer) = changed_input(step, before, after).filter(|_| !request.force) {
            return Err(Error::RerunRefused(format!(
                "step {:?} is carried over but read the run input {pointer}, which changes: its output was made \
                     from the old value (rerun from {:?}, or pass --force to keep it)",
                step.name, step.name
            )));
        }
    }
    Ok(())
}

/// The step named `from` and every step downstream of it.
fn downstream(steps: &[Original], from: &str) -> Result<HashSet<Uuid>, Error> {
    let start = steps.iter().find(|s| s.name == from).ok_or_else(|| {
        let names: Vec<&str> = steps.iter().map(|s| s.name.as_str()).collect();
        Error::RerunRefused(format!("the run has no step {from:?} (its steps: {})", names.join(", ")))
    })?;
    let mut dependents: HashMap<Uuid, Vec<Uuid>> = HashMap::new();
    for step in steps {
        for d in &step.depends_on {
            dependents.entry(*d).or_default().push(step.id);
        }
    }
    let mut found = HashSet::from([start.id]);
    let mut next = vec![start.id];
    while let Some(id) = next.pop() {
        for &d in dependents.get(&id).map(Vec::as_slice).unwrap_or_default() {
            if found.insert(d) {
                next.push(d);
            }
        }
    }
    Ok(found)
}

/// The first run input `step` reads (`$input` in its input or map list) whose value differs
/// between `before` and `after`.
fn changed_input(step: &Original, before: &Value, after: &Value) -> Option<String> {
    let lists = [Some(&step.input), step.for_each.as_ref()];
    lists.into_iter().flatten().flat_map(scan).find_map(|found| match found.reference {
        Ok(Reference::Input { pointer }) if before.pointer(pointer) != after.pointer(pointer) => {
            Some(pointer.to_owned())
        }
        _ => None,
    })
}
