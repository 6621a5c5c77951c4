//! Reading a run with its steps, each with its dependencies, attempts and artifacts.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use rara_domain::state::{AttemptOutcome, RunStatus, StepStatus};
use serde::Serialize;
use uuid::Uuid;

use crate::{Error, Store};

#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct RunView {
    pub id: Uuid,
    pub name: String,
    pub status: RunStatus,
    pub idempotency_key: Option<String>,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    #[sqlx(skip)]
    pub steps: Vec<StepView>,
}

#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
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
    pub progress: Option<serde_json::Value>,
    pub output: Option<serde_json::Value>,
    pub error: Option<serde_json::Value>,
    pub finished_at: Option<DateTime<Utc>>,
    #[sqlx(skip)]
    pub depends_on: Vec<String>,
    #[sqlx(skip)]
    pub attempts: Vec<AttemptView>,
    #[sqlx(skip)]
    pub artifacts: Vec<ArtifactView>,
}

impl StepView {
    /// How far the step got, `0.0..=1.0`: 1 once it succeeded, else its last reported progress.
    pub fn progress_fraction(&self) -> f64 {
        if self.status == StepStatus::Succeeded {
            return 1.0;
        }
        self.progress.as_ref().and_then(|p| p.get("fraction")?.as_f64()).unwrap_or(0.0)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct AttemptView {
    #[serde(skip)]
    pub step_id: Uuid,
    pub attempt: i32,
    pub fence: i64,
    pub leased_by: String,
    pub outcome: AttemptOutcome,
    pub error: Option<serde_json::Value>,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// For a retrying attempt: when the next attempt was due.
    pub retry_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct ArtifactView {
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
    /// A run with its steps in definition order, or [`Error::RunNotFound`].
    pub async fn run(&self, run_id: Uuid) -> Result<RunView, Error> {
        let mut run: RunView = sqlx::query_as(
            "SELECT id, name, status, idempotency_key, created_at, finished_at FROM workflow_runs WHERE id = $1",
        )
        .bind(run_id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or(Error::RunNotFound(run_id))?;

        let mut steps: Vec<StepView> = sqlx::query_as(
            "SELECT id, name, operation, version, status, attempt, max_attempts, next_run_at, leased_by,
                    lease_expires_at, fence, progress, output, error, finished_at
             FROM steps WHERE run_id = $1 ORDER BY position",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?;

        let deps: Vec<(Uuid, String)> = sqlx::query_as(
            "SELECT d.step_id, up.name FROM step_dependencies d
             JOIN steps s ON s.id = d.step_id JOIN steps up ON up.id = d.depends_on
             WHERE s.run_id = $1 ORDER BY up.position",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?;
        let attempts: Vec<AttemptView> = sqlx::query_as(
            "SELECT a.step_id, a.attempt, a.fence, a.leased_by, a.outcome, a.error, a.started_at, a.finished_at, a.retry_at
             FROM step_attempts a JOIN steps s ON s.id = a.step_id
             WHERE s.run_id = $1 ORDER BY a.attempt",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?;
        let artifacts: Vec<ArtifactView> = sqlx::query_as(
            "SELECT a.step_id, a.attempt, a.name, a.uri, a.media_type, a.size_bytes, a.digest, a.created_at
             FROM artifacts a JOIN steps s ON s.id = a.step_id
             WHERE s.run_id = $1 ORDER BY a.id",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?;

        let index: HashMap<Uuid, usize> = steps.iter().enumerate().map(|(i, s)| (s.id, i)).collect();
        for (step_id, name) in deps {
            if let Some(&i) = index.get(&step_id) {
                steps[i].depends_on.push(name);
            }
        }
        for attempt in attempts {
            if let Some(&i) = index.get(&attempt.step_id) {
                steps[i].attempts.push(attempt);
            }
        }
        for artifact in artifacts {
            if let Some(&i) = index.get(&artifact.step_id) {
                steps[i].artifacts.push(artifact);
            }
        }
        run.steps = steps;
        Ok(run)
    }

    pub(crate) async fn run_exists(&self, run_id: Uuid) -> Result<bool, Error> {
        Ok(sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM workflow_runs WHERE id = $1)")
            .bind(run_id)
            .fetch_one(&self.pool)
            .await?)
    }

    pub(crate) async fn step_exists(&self, step_id: Uuid) -> Result<bool, Error> {
        Ok(sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM steps WHERE id = $1)")
            .bind(step_id)
            .fetch_one(&self.pool)
            .await?)
    }
}

/// One line of `rara list`.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct RunSummary {
    pub id: Uuid,
    pub name: String,
    pub status: RunStatus,
    pub steps_total: i32,
    pub steps_finished: i32,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl Store {
    /// The most recent runs, newest first, optionally only those in `status`.
    pub async fn list_runs(&self, status: Option<RunStatus>, limit: u32) -> Result<Vec<RunSummary>, Error> {
        Ok(sqlx::query_as(
            "SELECT id, name, status, steps_total, steps_total - steps_unfinished AS steps_finished, created_at, finished_at
             FROM workflow_runs WHERE $1::rara_run_status IS NULL OR status = $1
             ORDER BY created_at DESC LIMIT $2",
        )
        .bind(status)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?)
    }

    /// The run a step belongs to.
    pub async fn run_of_step(&self, step_id: Uuid) -> Result<Uuid, Error> {
        sqlx::query_scalar("SELECT run_id FROM steps WHERE id = $1")
            .bind(step_id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or(Error::StepNotFound(step_id))
    }
}
