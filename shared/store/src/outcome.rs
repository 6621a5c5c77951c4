//! Outcomes and cancellation. Every outcome is fenced ([`fence`](crate::fence)): a holder
//! whose write matches no row gets [`Error::LeaseLost`].
//!
//! Finishing a step keeps the run's counters in the same statement, so a run finishes
//! (succeeded, failed or cancelled) the moment its last step does, without scanning its
//! steps. A failed or cancelled step skips its transitive dependents, with a reason.

use std::time::Duration;

use rara_domain::StepError;
use rara_domain::step_error::codes;
use rara_domain::workflow::MAX_RETRY_DELAY_SECONDS;
use uuid::Uuid;

use crate::fence::{columns, per_holder};
use crate::{DUE_CHANNEL, Error, Holder, Store, millis, sql};

/// The longest delay [`Store::retry`] writes: a day, the bound on a retry delay at submit
/// ([`MAX_RETRY_DELAY_SECONDS`]).
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(MAX_RETRY_DELAY_SECONDS);

/// How a retry comes back (DESIGN.md "Alignment of SQS and leases").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryVia {
    /// The same message returns after the delay: the step stays `leased` with the same lease
    /// token, and its lease ends `lease` after the retry is due (the runtime passes the
    /// delivery timeout, as for a fresh lease).
    Message { lease: Duration },
    /// The delay is too long for SQS visibility: the step goes back to `pending` with
    /// `next_run_at`, the lease is cleared and the message must be deleted.
    Postgres,
}

/// The error of a dependent that a failed or cancelled step skips (bound into every
/// statement that finishes steps other than by success, [`sql`]'s `finish_tail.sql`).
pub(crate) fn dependency_failed() -> serde_json::Value {
    StepError::permanent(codes::DEPENDENCY_FAILED, "not run: a step it depends on failed or was cancelled").to_json()
}

/// Fails each holder's step with its error (`errors[i]` for `holders[i]`), fenced, on `conn`
/// (the pool, or a transaction that expands maps): dependents are skipped, runs whose last
/// unfinished steps these were fail.
pub(crate) async fn fail_held<'e>(
    conn: impl sqlx::PgExecutor<'e>,
    holders: &[&Holder],
    errors: &[serde_json::Value],
) -> Result<Vec<Result<(), Error>>, Error> {
    let held = columns(holders);
    let landed: Vec<Uuid> = sqlx::query_scalar(sql::FAIL.as_str())
        .bind(&held.step_ids)
        .bind(&held.workers)
        .bind(&held.fences)
        .bind(errors)
        .bind(dependency_failed())
        .fetch_all(conn)
        .await?;
    Ok(per_holder(holders, &landed))
}

impl Store {
    /// Records successes in one statement: releases dependents, finishes runs whose last step
    /// this was. One result per item, in order; a holder that lost its lease gets `LeaseLost`.
    pub async fn succeed(&self, items: &[(Holder, serde_json::Value)]) -> Result<Vec<Result<(), Error>>, Error> {
        let holders: Vec<&Holder> = items.iter().map(|(h, _)| h).collect();
        let held = columns(&holders);
        let outputs: Vec<&serde_json::Value> = items.iter().map(|(_, o)| o).collect();
        let landed: Vec<Uuid> = sqlx::query_scalar(sql::SUCCEED.as_str())
            .bind(&held.step_ids)
            .bind(&held.workers)
            .bind(&held.fences)
            .bind(&outputs)
            .bind(DUE_CHANNEL)
            .fetch_all(&self.pool)
            .await?;
        Ok(per_holder(&holders, &landed))
    }

    /// Records retryable failures with attempts left: each step runs again after its delay.
    /// With [`RetryVia::Message`] the step stays leased under the same token; with
    /// [`RetryVia::Postgres`] it goes back to pending and its message must be deleted.
    ///
    /// Each delay (and the lease) is clamped to [`MAX_RETRY_DELAY`] before it is bound: a step
    /// whose stored policy predates the bounds at submit (`initial_delay_seconds: 1e16`) waits a
    /// day, and cannot overflow the statement's timestamps and fail its siblings.
    pub async fn retry(
        &self,
        items: &[(Holder, StepError, Duration)],
        via: RetryVia,
    ) -> Result<Vec<Result<(), Error>>, Error> {
        let holders: Vec<&Holder> = items.iter().map(|(h, _, _)| h).collect();
        let held = columns(&holders);
        let errors: Vec<serde_json::Value> = items.iter().map(|(_, e, _)| e.to_json()).collect();
        let delays: Vec<i64> = items.iter().map(|(_, _, d)| millis((*d).min(MAX_RETRY_DELAY))).collect();
        let lease = match via {
            RetryVia::Message { lease } => Some(millis(lease.min(MAX_RETRY_DELAY))),
            RetryVia::Postgres => None,
        };
        let landed: Vec<Uuid> = sqlx::query_scalar(sql::RETRY.as_str())
            .bind(&held.step_ids)
            .bind(&held.workers)
            .bind(&held.fences)
            .bind(&errors)
            .bind(&delays)
            .bind(lease)
            .fetch_all(&self.pool)
            .await?;
        Ok(per_holder(&holders, &landed))
    }

    /// Records permanent failures: dependents are skipped with a reason and runs whose last
    /// unfinished steps these were fail.
    pub async fn fail(&self, items: &[(Holder, StepError)]) -> Result<Vec<Result<(), Error>>, Error> {
        let holders: Vec<&Holder> = items.iter().map(|(h, _)| h).collect();
        let errors: Vec<serde_json::Value> = items.iter().map(|(_, e)| e.to_json()).collect();
        fail_held(&self.pool, &holders, &errors).await
    }

    /// Cancels a step that has not finished; its dependents are skipped. A running holder's
    /// next write gets `LeaseLost`. Returns whether the step was cancelled (`false`: it had
    /// already finished); a missing step is [`Error::StepNotFound`].
    pub async fn cancel_step(&self, step_id: Uuid, reason: &str) -> Result<bool, Error> {
        let error = StepError::permanent(codes::CANCELLED, reason)
            .with_details(serde_json::json!({"cancelled": "step"}))
            .to_json();
        let cancelled: Vec<Uuid> = sqlx::query_scalar(sql::CANCEL_STEP.as_str())
            .bind(step_id)
            .bind(&error)
            .bind(dependency_failed())
            .fetch_all(&self.pool)
            .await?;
        if cancelled.is_empty() && !self.step_exists(step_id).await? {
            return Err(Error::StepNotFound(step_id));
        }
        Ok(!cancelled.is_empty())
    }

    /// Cancels every unfinished step of a run; the run ends `cancelled` (or `failed` if a
    /// step had already failed). Returns how many steps were cancelled.
    pub async fn cancel_run(&self, run_id: Uuid, reason: &str) -> Result<u64, Error> {
        let mut connection = self.pool.acquire().await?;
        let cancelled = cancel_run_in(&mut connection, run_id, reason).await?;
        if cancelled == 0 && !self.run_exists(run_id).await? {
            return Err(Error::RunNotFound(run_id));
        }
        Ok(cancelled)
    }
}

/// Cancels every unfinished step of the run `run_id` on `connection` (a schedule's round
/// cancels a previous run in its transaction); how many steps it cancelled.
pub(crate) async fn cancel_run_in(
    connection: &mut sqlx::PgConnection,
    run_id: Uuid,
    reason: &str,
) -> Result<u64, Error> {
    let error =
        StepError::permanent(codes::CANCELLED, reason).with_details(serde_json::json!({"cancelled": "run"})).to_json();
    let cancelled: Vec<Uuid> = sqlx::query_scalar(sql::CANCEL_RUN.as_str())
        .bind(run_id)
        .bind(&error)
        .bind(dependency_failed())
        .fetch_all(&mut *connection)
        .await?;
    Ok(cancelled.len() as u64)
}

impl Store {
    /// Retries a failed or cancelled step by hand (`rara retry`): it gets a new attempt
    /// budget and is due at once; the dependents it had skipped come back; its run runs
    /// again. A map step comes back with its children that did not succeed. Returns how many
    /// steps came back (0: the step had not failed or been cancelled); a map child is
    /// [`Error::MapChild`] (retry its map step).
    pub async fn retry_step(&self, step_id: Uuid) -> Result<u64, Error> {
        let row = sqlx::query_file!("sql/retry_step.sql", step_id).fetch_one(&self.pool).await?;
        if let Some(map) = row.map {
            return Err(Error::MapChild { step_id, map });
        }
        let revived = row.revived;
        if revived == 0 && !self.step_exists(step_id).await? {
            return Err(Error::StepNotFound(step_id));
        }
        if revived > 0 {
            self.notify_due().await?;
        }
        Ok(revived as u64)
    }
}
