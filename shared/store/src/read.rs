//! Reading a run with its steps, each with its dependencies, attempts and artifacts. Errors
//! and progress come typed ([`StepError`], [`Progress`]); serialized, a view is the JSON
//! `rara status --json` prints.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use rara_domain::StepError;
use rara_domain::references::{self, Sources};
use rara_domain::state::{AttemptOutcome, RunStatus, StepStatus};
use rara_domain::workflow::MAX_RUN_STEPS;
use serde::{Deserialize, Serialize};
use sqlx::types::Json;
use uuid::Uuid;

pub use crate::browse::RunLink;
pub use crate::browse::RunSummary;
use crate::{Error, Store};

/// A step's latest progress report, as `running.rs` records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// `0.0..=1.0`.
    pub fraction: f64,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunView {
    pub id: Uuid,
    pub name: String,
    pub status: RunStatus,
    pub idempotency_key: Option<String>,
    /// The registered version the run was made from (`rara submit --workflow`); `None` for a
    /// definition given whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_version: Option<i32>,
    /// The run's inputs as submit resolved them (given, or else defaults); `{"$input":
    /// "/pointer"}` references read them.
    pub inputs: serde_json::Value,
    /// The run's output, its references resolved, once it succeeded (and declared one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Value>,
    /// Why the output of a succeeded run could not be resolved: a reference found nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// A rerun: the run it was made from; then the reruns made from this run, oldest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun_of: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reruns: Vec<Uuid>,
    /// A child run: the step that made it (and waits for it); then the child runs this run's
    /// steps made, oldest first (docs/src/guide/recover.md "Child workflows").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<RunLink>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<RunLink>,
    pub steps: Vec<StepView>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepView {
    pub id: Uuid,
    pub name: String,
    pub operation: String,
    pub version: Option<String>,
    pub status: StepStatus,
    pub attempt: i32,
    pub max_attempts: i32,
    pub next_run_at: DateTime<Utc>,
    pub leased_by: Option<String>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub fence: Option<i64>,
    pub progress: Option<Json<Progress>>,
    pub output: Option<serde_json::Value>,
    pub error: Option<Json<StepError>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// The remote executor that runs the step's current attempt, once that attempt was
    /// detached (DESIGN.md "Long steps").
    pub remote_endpoint: Option<String>,
    /// A map step (`for_each`), once expanded: how many children it has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub map_size: Option<i32>,
    /// A map child: the name of its map step ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// ... and the index of its element in the map's list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub map_index: Option<i32>,
    pub depends_on: Vec<String>,
    pub attempts: Vec<AttemptView>,
    pub artifacts: Vec<ArtifactView>,
    /// Carried over by a rerun (not run again): the step whose attempts and artifacts it shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried_from: Option<Uuid>,
    /// A waiting step: what it waits for and how long it may still wait
    /// (`signal approve, 1 h 12 min left`; [`crate::waits::WaitView::describe`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<String>,
}

impl StepView {
    /// How far the step got, `0.0..=1.0`: 1 once it succeeded, else its last reported progress.
    pub fn progress_fraction(&self) -> f64 {
        if self.status == StepStatus::Succeeded {
            return 1.0;
        }
        self.progress.as_ref().map_or(0.0, |p| p.fraction)
    }

    /// Whether the step's attempt runs detached on a remote executor right now: parked
    /// (`leased` again under its token) until an executor re-attaches.
    pub fn is_detached(&self) -> bool {
        self.status == StepStatus::Leased && self.remote_endpoint.is_some()
    }

    /// The status as people read it: `running (detached)`, `succeeded (carried over)`, `waiting (…)`.
    pub fn status_text(&self) -> String {
        match &self.waiting_for {
            _ if self.is_detached() => "running (detached)".to_owned(),
            Some(what) if self.status == StepStatus::Waiting => format!("waiting ({what})"),
            _ if self.carried_from.is_some() => format!("{} (carried over)", self.status),
            _ => self.status.to_string(),
        }
    }
}

/// A stretch of an attempt during which an executor was attached to it, up to the moment it
/// let the attempt go on detached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DetachedSpan {
    /// The executor (worker identity) that was attached.
    pub by: String,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// The last event sequence it recorded.
    pub sequence: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptView {
    #[serde(skip)]
    pub step_id: Uuid,
    pub attempt: i32,
    pub fence: i64,
    pub leased_by: String,
    pub outcome: AttemptOutcome,
    pub error: Option<Json<StepError>>,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// For a retrying attempt: when the next attempt was due.
    pub retry_at: Option<DateTime<Utc>>,
    /// The remote executor the attempt ran on, when it was detached at least once.
    pub remote_endpoint: Option<String>,
    /// The capability version the remote executor ran the attempt at (its `running` event).
    pub capability_version: Option<String>,
    /// Each stretch an executor was attached, then let the attempt go on detached; the last
    /// stretch runs to `finished_at` (or now).
    pub detached_spans: Json<Vec<DetachedSpan>>,
    /// The input the attempt ran with when its step's input holds references (substituted;
    /// secret references kept as references). Absent: it ran with the step's input as stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArtifactView {
    /// Its id: `GET /api/artifacts/{id}` downloads it.
    pub id: i64,
    #[serde(skip)]
    pub step_id: Uuid,
    pub attempt: i32,
    pub name: String,
    pub uri: String,
    pub media_type: Option<String>,
    pub size_bytes: Option<i64>,
    pub digest: Option<String>,
    pub created_at: DateTime<Utc>,
}

impl Store {
    /// A run with its steps in definition order, or [`Error::RunNotFound`]. Its five
    /// statements (the run, its steps, their dependencies, attempts and artifacts) read one
    /// snapshot: a read-only `REPEATABLE READ` transaction, so a step that finishes meanwhile is
    /// never shown finished without its attempt, nor a run succeeded before its last step.
    pub async fn run(&self, run_id: Uuid) -> Result<RunView, Error> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(ONE_SNAPSHOT).execute(&mut *tx).await?;
        let run = sqlx::query_file!("sql/read_run.sql", run_id)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(Error::RunNotFound(run_id))?;
        let mut steps = read_steps(&mut tx, run_id).await?;
        let index: HashMap<Uuid, usize> = steps.iter().enumerate().map(|(i, s)| (s.id, i)).collect();
        for d in sqlx::query_file!("sql/read_dependencies.sql", run_id).fetch_all(&mut *tx).await? {
            if let Some(&i) = index.get(&d.step_id) {
                steps[i].depends_on.push(d.name);
            }
        }
        for a in read_attempts(&mut tx, run_id).await? {
            if let Some(&i) = index.get(&a.step_id) {
                steps[i].attempts.push(a);
            }
        }
        for a in read_artifacts(&mut tx, run_id).await? {
            if let Some(&i) = index.get(&a.step_id) {
                steps[i].artifacts.push(a);
            }
        }
        if steps.iter().any(|s| s.status == StepStatus::Waiting) {
            let now = chrono::Utc::now();
            for wait in crate::waits::views(&mut tx, Some(run_id), MAX_RUN_STEPS as u32).await? {
                if let Some(&i) = index.get(&wait.step_id) {
                    steps[i].waiting_for = Some(wait.describe(now));
                }
            }
        }
        tx.commit().await?;
        // `workflow_runs.outputs` holds the output as defined; `{}` (the column's default) is none.
        let declared = !run.outputs.is_null() && run.outputs != serde_json::json!({});
        let (output, output_error) = if declared && run.status == RunStatus::Succeeded {
            match references::substitute_output(&run.outputs, &Finished::new(&steps, &run.inputs)) {
                Ok(output) => (Some(output), None),
                Err(missing) => (None, Some(missing.to_string())),
            }
        } else {
            (None, None)
        };
        Ok(RunView {
            id: run.id,
            name: run.name,
            status: run.status,
            idempotency_key: run.idempotency_key,
            workflow_version: run.workflow_version,
            inputs: run.inputs,
            output,
            output_error,
            created_at: run.created_at,
            finished_at: run.finished_at,
            rerun_of: run.rerun_of,
            reruns: run.reruns,
            parent: run.parent.and_then(|p| serde_json::from_value(p).ok()),
            children: serde_json::from_value(run.children).unwrap_or_default(),
            steps,
        })
    }

    pub(crate) async fn run_exists(&self, run_id: Uuid) -> Result<bool, Error> {
        Ok(sqlx::query_file_scalar!("sql/run_exists.sql", run_id).fetch_one(&self.pool).await?)
    }

    pub(crate) async fn step_exists(&self, step_id: Uuid) -> Result<bool, Error> {
        Ok(sqlx::query_file_scalar!("sql/step_exists.sql", step_id).fetch_one(&self.pool).await?)
    }
}

/// The first statement of [`Store::run`]'s transaction: every statement after it reads the
/// snapshot of the first, and none may write.
const ONE_SNAPSHOT: &str = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY";

type Tx = sqlx::Transaction<'static, sqlx::Postgres>;

/// The steps of the run `run_id`, in definition order, without their dependencies, attempts
/// and artifacts.
async fn read_steps(tx: &mut Tx, run_id: Uuid) -> Result<Vec<StepView>, Error> {
    let rows = sqlx::query_file!("sql/read_steps.sql", run_id).fetch_all(&mut **tx).await?;
    let names: HashMap<Uuid, String> = rows.iter().map(|s| (s.id, s.name.clone())).collect();
    Ok(rows
        .into_iter()
        .map(|s| StepView {
            id: s.id,
            name: s.name,
            operation: s.operation,
            version: s.version,
            status: s.status,
            attempt: s.attempt,
            max_attempts: s.max_attempts,
            next_run_at: s.next_run_at,
            leased_by: s.leased_by,
            lease_expires_at: s.lease_expires_at,
            fence: s.fence,
            progress: s.progress,
            output: s.output,
            error: s.error,
            finished_at: s.finished_at,
            remote_endpoint: s.remote_endpoint,
            map_size: s.map_size,
            parent: s.parent_id.and_then(|id| names.get(&id).cloned()),
            map_index: s.map_index,
            carried_from: s.carried_from,
            depends_on: Vec::new(),
            attempts: Vec::new(),
            artifacts: Vec::new(),
            waiting_for: None,
        })
        .collect())
}

/// The attempts of the steps of the run `run_id`, oldest first.
async fn read_attempts(tx: &mut Tx, run_id: Uuid) -> Result<Vec<AttemptView>, Error> {
    let rows = sqlx::query_file!("sql/read_attempts.sql", run_id).fetch_all(&mut **tx).await?;
    Ok(rows
        .into_iter()
        .map(|a| AttemptView {
            step_id: a.step_id,
            attempt: a.attempt,
            fence: a.fence,
            leased_by: a.leased_by,
            outcome: a.outcome,
            error: a.error,
            started_at: a.started_at,
            finished_at: a.finished_at,
            retry_at: a.retry_at,
            remote_endpoint: a.remote_endpoint,
            capability_version: a.capability_version,
            detached_spans: a.detached_spans,
            input: a.input,
        })
        .collect())
}

/// The artifacts of the steps of the run `run_id`, in the order they were recorded.
async fn read_artifacts(tx: &mut Tx, run_id: Uuid) -> Result<Vec<ArtifactView>, Error> {
    let rows = sqlx::query_file!("sql/read_artifacts.sql", run_id).fetch_all(&mut **tx).await?;
    Ok(rows
        .into_iter()
        .map(|a| ArtifactView {
            id: a.id,
            step_id: a.step_id,
            attempt: a.attempt,
            name: a.name,
            uri: a.uri,
            media_type: a.media_type,
            size_bytes: a.size_bytes,
            digest: a.digest,
            created_at: a.created_at,
        })
        .collect())
}

/// A read run as its outputs' references see it: the outputs of its succeeded steps, the
/// latest artifact of each name from a succeeded step's last attempt, its inputs.
struct Finished<'a> {
    outputs: HashMap<&'a str, &'a serde_json::Value>,
    artifacts: HashMap<(&'a str, &'a str), serde_json::Value>,
    inputs: &'a serde_json::Value,
}

impl<'a> Finished<'a> {
    fn new(steps: &'a [StepView], inputs: &'a serde_json::Value) -> Self {
        let mut outputs = HashMap::new();
        let mut artifacts = HashMap::new();
        for step in steps.iter().filter(|s| s.status == StepStatus::Succeeded) {
            outputs.insert(step.name.as_str(), step.output.as_ref().unwrap_or(&serde_json::Value::Null));
            // In the order recorded: the latest of a name wins.
            for a in step.artifacts.iter().filter(|a| a.attempt == step.attempt) {
                let descriptor = serde_json::json!({
                    "uri": a.uri, "media_type": a.media_type, "size_bytes": a.size_bytes, "digest": a.digest,
                });
                artifacts.insert((step.name.as_str(), a.name.as_str()), descriptor);
            }
        }
        Finished { outputs, artifacts, inputs }
    }
}

impl Sources for Finished<'_> {
    fn output(&self, step: &str) -> Option<&serde_json::Value> {
        self.outputs.get(step).copied()
    }

    fn artifact(&self, step: &str, name: &str) -> Option<&serde_json::Value> {
        self.artifacts.iter().find(|((s, n), _)| *s == step && *n == name).map(|(_, descriptor)| descriptor)
    }

    fn inputs(&self) -> Option<&serde_json::Value> {
        Some(self.inputs)
    }
}

impl Store {
    /// The run a step belongs to.
    pub async fn run_of_step(&self, step_id: Uuid) -> Result<Uuid, Error> {
        sqlx::query_file_scalar!("sql/run_of_step.sql", step_id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or(Error::StepNotFound(step_id))
    }
}
