//! An operator's set-based actions over many runs or steps, each one statement per batch
//! (`POST /api/bulk/retry`, `POST /api/bulk/cancel`): what `rara-operator` composes. The
//! caller bounds each batch (a statement locks every row it changes until it commits).

use rara_domain::StepError;
use rara_domain::step_error::codes;
use uuid::Uuid;

use crate::detach::{DetachedAttempt, DetachedRow};
use crate::outcome::dependency_failed;
use crate::{Error, Store, sql};

impl Store {
    /// Retries the failed or cancelled steps among `step_ids` in one statement, as
    /// [`retry_step`](Self::retry_step) retries each (`sql/retry_steps.sql`): each gets a new
    /// attempt budget, its skipped dependents come back, its run runs again; a step that comes
    /// back waits on what comes back with it. Map children, steps that did not fail and ids
    /// that name no step are left as they are. Returns how many steps came back.
    pub async fn retry_steps(&self, step_ids: &[Uuid]) -> Result<u64, Error> {
        if step_ids.is_empty() {
            return Ok(0);
        }
        let revived: i64 = sqlx::query_file_scalar!("sql/retry_steps.sql", step_ids).fetch_one(&self.pool).await?;
        if revived > 0 {
            self.notify_due().await?;
        }
        Ok(u64::try_from(revived).unwrap_or(0))
    }

    /// Cancels every unfinished step of the runs `run_ids` in one statement, as
    /// [`cancel_run`](Self::cancel_run) cancels each run's: the runs end `cancelled` (or
    /// `failed` if a step had already failed). Ids that name no run are left out. Returns how
    /// many steps were cancelled.
    pub async fn cancel_runs(&self, run_ids: &[Uuid], reason: &str) -> Result<u64, Error> {
        if run_ids.is_empty() {
            return Ok(0);
        }
        let error = StepError::permanent(codes::CANCELLED, reason)
            .with_details(serde_json::json!({"cancelled": "run"}))
            .to_json();
        let cancelled: Vec<Uuid> = sqlx::query_scalar(sql::CANCEL_RUNS.as_str())
            .bind(run_ids)
            .bind(&error)
            .bind(dependency_failed())
            .fetch_all(&self.pool)
            .await?;
        Ok(cancelled.len() as u64)
    }

    /// The attempts of the runs `run_ids` that run detached (parked) on a remote executor, in
    /// one statement: read before [`cancel_runs`](Self::cancel_runs).
    pub async fn detached_attempts_of_runs(&self, run_ids: &[Uuid]) -> Result<Vec<DetachedAttempt>, Error> {
        let rows = sqlx::query_file_as!(DetachedRow, "sql/detached_attempts_of_runs.sql", run_ids)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(DetachedAttempt::from).collect())
    }

    /// Times out up to `limit` runs past their deadline (`workflow_runs.deadline_at`), the
    /// earliest first, in one transaction that locks them (another scheduler takes others):
    /// every unfinished step is cancelled with `RUN_TIMED_OUT`, as a cancel of the run
    /// cancels it. Returns the runs and their attempts that ran detached (read before the
    /// cancel, for their executors to be told).
    pub async fn time_out_runs(&self, limit: u32) -> Result<(Vec<Uuid>, Vec<DetachedAttempt>), Error> {
        let mut tx = self.pool.begin().await?;
        let runs: Vec<Uuid> =
            sqlx::query_file_scalar!("sql/overdue_runs.sql", i64::from(limit)).fetch_all(&mut *tx).await?;
        if runs.is_empty() {
            return Ok((runs, Vec::new()));
        }
        let error = StepError::permanent(codes::RUN_TIMED_OUT, "the run passed its deadline (its timeout_seconds)")
            .with_details(serde_json::json!({"cancelled": "run"}));
        let detached = cancel_locked(&mut tx, &runs, &error).await?;
        tx.commit().await?;
        Ok((runs, detached))
    }
}

/// Cancels the runs `runs`, locked by the caller's transaction `tx`, every unfinished step with
/// `error` (as [`Store::cancel_runs`] cancels them); returns their attempts that ran detached,
/// read before the cancel, for their executors to be told.
pub(crate) async fn cancel_locked(
    tx: &mut sqlx::PgConnection,
    runs: &[Uuid],
    error: &StepError,
) -> Result<Vec<DetachedAttempt>, Error> {
    let detached = sqlx::query_file_as!(DetachedRow, "sql/detached_attempts_of_runs.sql", runs)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .map(DetachedAttempt::from)
        .collect();
    sqlx::query_scalar::<_, Uuid>(sql::CANCEL_RUNS.as_str())
        .bind(runs)
        .bind(error.to_json())
        .bind(dependency_failed())
        .fetch_all(&mut *tx)
        .await?;
    Ok(detached)
}
