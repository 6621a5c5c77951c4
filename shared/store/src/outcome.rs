//! Outcomes and cancellation. Every outcome is fenced by holder, fence and `status =
//! 'running'`; a holder whose write matches no row gets [`Error::LeaseLost`].
//!
//! Finishing a step keeps the run's counters in the same statement, so a run finishes
//! (succeeded, failed or cancelled) the moment its last step does, without scanning its
//! steps. A failed or cancelled step skips its transitive dependents, with a reason.

use std::sync::LazyLock;
use std::time::Duration;

use rara_domain::StepError;
use rara_domain::step_error::codes;
use uuid::Uuid;

use crate::{Error, Holder, Store, millis};

/// How a retry comes back (DESIGN.md "Alignment of SQS and leases").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryVia {
    /// The same message returns after the delay: the step stays `leased` with the same lease
    /// token, and its lease ends one lease duration after the retry is due.
    Message { lease: Duration },
    /// The delay is too long for SQS visibility: the step goes back to `pending` with
    /// `next_run_at`, the lease is cleared and the message must be deleted.
    Postgres,
}

/// The shared tail of every statement that finishes steps other than by success. It expects
/// a `targets` CTE with columns `(id, new_status, error, attempt_outcome)` whose rows are
/// locked (`FOR UPDATE`), so its conditions hold when the rows change.
pub(crate) const FINISH_TAIL: &str = "
finished AS (
    UPDATE steps s
    SET status = t.new_status, error = t.error, leased_by = NULL, lease_token = NULL,
        lease_expires_at = NULL, finished_at = now(), updated_at = now()
    FROM targets t
    WHERE s.id = t.id
    RETURNING s.id, s.run_id, s.attempt, s.status
),
closed AS (
    UPDATE step_attempts a
    SET outcome = t.attempt_outcome, error = t.error, finished_at = now()
    FROM finished f JOIN targets t ON t.id = f.id
    WHERE a.step_id = f.id AND a.attempt = f.attempt AND a.outcome = 'running'
),
downstream(id) AS (
    SELECT d.step_id FROM step_dependencies d JOIN finished f ON d.depends_on = f.id
    UNION
    SELECT d.step_id FROM step_dependencies d JOIN downstream x ON d.depends_on = x.id
),
skipped AS (
    UPDATE steps s
    SET status = 'skipped', finished_at = now(), updated_at = now(),
        error = jsonb_build_object('code', 'DEPENDENCY_FAILED', 'retryable', false, 'details', '{}'::jsonb,
                                   'message', 'not run: a step it depends on failed or was cancelled')
    FROM downstream x
    WHERE s.id = x.id AND s.status = 'pending' AND s.id NOT IN (SELECT id FROM targets)
    RETURNING s.id, s.run_id, s.status
),
tally AS (
    SELECT run_id, count(*)::int AS finished,
           count(*) FILTER (WHERE status = 'failed')::int AS failed,
           count(*) FILTER (WHERE status = 'cancelled')::int AS cancelled
    FROM (SELECT run_id, status FROM finished UNION ALL SELECT run_id, status FROM skipped) x
    GROUP BY run_id
),
runs AS (
    UPDATE workflow_runs w
    SET steps_unfinished = w.steps_unfinished - t.finished,
        steps_failed = w.steps_failed + t.failed,
        steps_cancelled = w.steps_cancelled + t.cancelled,
        status = CASE
            WHEN w.steps_unfinished - t.finished > 0 THEN w.status
            WHEN w.steps_failed + t.failed > 0 THEN 'failed'
            WHEN w.steps_cancelled + t.cancelled > 0 THEN 'cancelled'
            ELSE 'succeeded' END::rara_run_status,
        finished_at = CASE WHEN w.steps_unfinished - t.finished = 0 THEN now() END,
        updated_at = now()
    FROM tally t
    WHERE w.id = t.run_id
)
SELECT id FROM finished";

/// `WITH RECURSIVE targets AS (<targets>), <FINISH_TAIL>`: one statement.
pub(crate) fn finish_statement(targets: &str) -> String {
    format!("WITH RECURSIVE targets AS ({targets}),{FINISH_TAIL}")
}

/// Public for the plan tests (`tests/explain.rs`).
pub const SUCCEED: &str = "
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::jsonb[]) AS t(step_id, worker, fence, output)
),
done AS (
    UPDATE steps s
    SET status = 'succeeded', output = i.output, error = NULL, leased_by = NULL, lease_token = NULL,
        lease_expires_at = NULL, finished_at = now(), updated_at = now()
    FROM input i
    WHERE s.id = i.step_id AND s.leased_by = i.worker AND s.fence = i.fence AND (s.status = 'running') IS TRUE
    RETURNING s.id, s.run_id, s.attempt
),
closed AS (
    UPDATE step_attempts a SET outcome = 'succeeded', finished_at = now()
    FROM done d WHERE a.step_id = d.id AND a.attempt = d.attempt AND a.outcome = 'running'
),
released AS (
    UPDATE steps s SET pending_deps = s.pending_deps - r.n, updated_at = now()
    FROM (SELECT dep.step_id, count(*)::int AS n
          FROM step_dependencies dep JOIN done d ON dep.depends_on = d.id
          GROUP BY dep.step_id) r
    WHERE s.id = r.step_id
    RETURNING s.status, s.pending_deps
),
-- A dependent that became due wakes the listening schedulers (delivered at commit).
woke AS (
    SELECT pg_notify('rara_due', '') FROM released WHERE status = 'pending' AND pending_deps = 0 LIMIT 1
),
runs AS (
    UPDATE workflow_runs w
    SET steps_unfinished = w.steps_unfinished - f.n,
        status = CASE
            WHEN w.steps_unfinished - f.n > 0 THEN w.status
            WHEN w.steps_failed > 0 THEN 'failed'
            WHEN w.steps_cancelled > 0 THEN 'cancelled'
            ELSE 'succeeded' END::rara_run_status,
        finished_at = CASE WHEN w.steps_unfinished - f.n = 0 THEN now() END,
        updated_at = now()
    FROM (SELECT run_id, count(*)::int AS n FROM done GROUP BY run_id) f
    WHERE w.id = f.run_id
)
SELECT d.id FROM done d CROSS JOIN (SELECT count(*) FROM woke) w";

/// Public for the plan tests (`tests/explain.rs`).
pub const RETRY: &str = "
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::jsonb[], $5::bigint[])
        AS t(step_id, worker, fence, error, delay_ms)
),
retried AS (
    UPDATE steps s
    SET status = CASE WHEN $6::bigint IS NULL THEN 'pending' ELSE 'leased' END::rara_step_status,
        next_run_at = now() + i.delay_ms * interval '1 millisecond',
        lease_expires_at = CASE WHEN $6::bigint IS NULL THEN NULL
                                ELSE now() + (i.delay_ms + $6::bigint) * interval '1 millisecond' END,
        lease_token = CASE WHEN $6::bigint IS NULL THEN NULL ELSE s.lease_token END,
        leased_by = CASE WHEN $6::bigint IS NULL THEN NULL ELSE s.leased_by END,
        error = i.error, progress = NULL, updated_at = now()
    FROM input i
    WHERE s.id = i.step_id AND s.leased_by = i.worker AND s.fence = i.fence AND (s.status = 'running') IS TRUE
      AND s.attempt < s.max_attempts
    RETURNING s.id, s.attempt, s.next_run_at, i.error
),
closed AS (
    UPDATE step_attempts a SET outcome = 'retrying', error = r.error, finished_at = now(), retry_at = r.next_run_at
    FROM retried r WHERE a.step_id = r.id AND a.attempt = r.attempt AND a.outcome = 'running'
)
SELECT id FROM retried";

/// A fenced permanent failure. `$1..$4`: step ids, workers, fences, errors.
const FAIL_TARGETS: &str = "
    SELECT s.id, 'failed'::rara_step_status AS new_status, i.error, 'failed'::rara_attempt_outcome AS attempt_outcome
    FROM steps s
    JOIN unnest($1::uuid[], $2::text[], $3::bigint[], $4::jsonb[]) AS i(step_id, worker, fence, error)
      ON s.id = i.step_id
    WHERE s.leased_by = i.worker AND s.fence = i.fence AND (s.status = 'running') IS TRUE
    FOR UPDATE OF s";

/// Cancels one step (`$1`) that has not finished. `$2`: the error.
const CANCEL_STEP_TARGETS: &str = "
    SELECT id, 'cancelled'::rara_step_status AS new_status, $2::jsonb AS error,
           'cancelled'::rara_attempt_outcome AS attempt_outcome
    FROM steps WHERE id = $1 AND status IN ('pending', 'leased', 'running')
    FOR UPDATE";

/// Cancels every unfinished step of a run (`$1`). `$2`: the error.
const CANCEL_RUN_TARGETS: &str = "
    SELECT id, 'cancelled'::rara_step_status AS new_status, $2::jsonb AS error,
           'cancelled'::rara_attempt_outcome AS attempt_outcome
    FROM steps WHERE run_id = $1 AND status IN ('pending', 'leased', 'running')
    FOR UPDATE";

/// Public for the plan tests (`tests/explain.rs`).
pub static FAIL: LazyLock<String> = LazyLock::new(|| finish_statement(FAIL_TARGETS));
static CANCEL_STEP: LazyLock<String> = LazyLock::new(|| finish_statement(CANCEL_STEP_TARGETS));
static CANCEL_RUN: LazyLock<String> = LazyLock::new(|| finish_statement(CANCEL_RUN_TARGETS));

/// Splits the holders into those whose write landed (`Ok`) and those that lost their lease.
fn per_holder(holders: &[&Holder], landed: &[Uuid]) -> Vec<Result<(), Error>> {
    holders
        .iter()
        .map(|h| {
            if landed.contains(&h.step_id) {
                Ok(())
            } else {
                Err(Error::LeaseLost { step_id: h.step_id, fence: h.fence })
            }
        })
        .collect()
}

fn columns<'a>(holders: &[&'a Holder]) -> (Vec<Uuid>, Vec<&'a str>, Vec<i64>) {
    (
        holders.iter().map(|h| h.step_id).collect(),
        holders.iter().map(|h| h.worker.as_str()).collect(),
        holders.iter().map(|h| h.fence).collect(),
    )
}

impl Store {
    /// Records successes in one statement: releases dependents, finishes runs whose last step
    /// this was. One result per item, in order; a holder that lost its lease gets `LeaseLost`.
    pub async fn succeed(&self, items: &[(Holder, serde_json::Value)]) -> Result<Vec<Result<(), Error>>, Error> {
        let holders: Vec<&Holder> = items.iter().map(|(h, _)| h).collect();
        let (ids, workers, fences) = columns(&holders);
        let outputs: Vec<&serde_json::Value> = items.iter().map(|(_, o)| o).collect();
        let landed: Vec<Uuid> = sqlx::query_scalar(SUCCEED)
            .bind(&ids)
            .bind(&workers)
            .bind(&fences)
            .bind(&outputs)
            .fetch_all(&self.pool)
            .await?;
        Ok(per_holder(&holders, &landed))
    }

    /// Records retryable failures with attempts left: each step runs again after its delay.
    /// With [`RetryVia::Message`] the step stays leased under the same token; with
    /// [`RetryVia::Postgres`] it goes back to pending and its message must be deleted.
    pub async fn retry(
        &self,
        items: &[(Holder, StepError, Duration)],
        via: RetryVia,
    ) -> Result<Vec<Result<(), Error>>, Error> {
        let holders: Vec<&Holder> = items.iter().map(|(h, _, _)| h).collect();
        let (ids, workers, fences) = columns(&holders);
        let errors: Vec<serde_json::Value> = items.iter().map(|(_, e, _)| e.to_json()).collect();
        let delays: Vec<i64> = items.iter().map(|(_, _, d)| millis(*d)).collect();
        let lease = match via {
            RetryVia::Message { lease } => Some(millis(lease)),
            RetryVia::Postgres => None,
        };
        let landed: Vec<Uuid> = sqlx::query_scalar(RETRY)
            .bind(&ids)
            .bind(&workers)
            .bind(&fences)
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
        let (ids, workers, fences) = columns(&holders);
        let errors: Vec<serde_json::Value> = items.iter().map(|(_, e)| e.to_json()).collect();
        let landed: Vec<Uuid> = sqlx::query_scalar(FAIL.as_str())
            .bind(&ids)
            .bind(&workers)
            .bind(&fences)
            .bind(&errors)
            .fetch_all(&self.pool)
            .await?;
        Ok(per_holder(&holders, &landed))
    }

    /// Cancels a step that has not finished; its dependents are skipped. A running holder's
    /// next write gets `LeaseLost`. Returns whether the step was cancelled (`false`: it had
    /// already finished); a missing step is [`Error::StepNotFound`].
    pub async fn cancel_step(&self, step_id: Uuid, reason: &str) -> Result<bool, Error> {
        let error = StepError::permanent(codes::CANCELLED, reason).to_json();
        let cancelled: Vec<Uuid> =
            sqlx::query_scalar(CANCEL_STEP.as_str()).bind(step_id).bind(&error).fetch_all(&self.pool).await?;
        if cancelled.is_empty() && !self.step_exists(step_id).await? {
            return Err(Error::StepNotFound(step_id));
        }
        Ok(!cancelled.is_empty())
    }

    /// Cancels every unfinished step of a run; the run ends `cancelled` (or `failed` if a
    /// step had already failed). Returns how many steps were cancelled.
    pub async fn cancel_run(&self, run_id: Uuid, reason: &str) -> Result<u64, Error> {
        let error = StepError::permanent(codes::CANCELLED, reason).to_json();
        let cancelled: Vec<Uuid> =
            sqlx::query_scalar(CANCEL_RUN.as_str()).bind(run_id).bind(&error).fetch_all(&self.pool).await?;
        if cancelled.is_empty() && !self.run_exists(run_id).await? {
            return Err(Error::RunNotFound(run_id));
        }
        Ok(cancelled.len() as u64)
    }
}

/// Gives a failed or cancelled step a new attempt budget (as many attempts again as its
/// `max_attempts`), brings back the dependents it had skipped, and reopens its run.
/// `$1`: the step id.
const RETRY_STEP: &str = "
WITH RECURSIVE target AS (
    SELECT id, run_id, status AS was FROM steps
    WHERE id = $1 AND status IN ('failed', 'cancelled')
    FOR UPDATE
),
revived AS (
    UPDATE steps s
    SET status = 'pending', max_attempts = s.attempt + s.max_attempts, next_run_at = now(), error = NULL,
        finished_at = NULL, updated_at = now()
    FROM target t WHERE s.id = t.id
    RETURNING s.id, s.run_id
),
downstream(id) AS (
    SELECT d.step_id FROM step_dependencies d JOIN revived r ON d.depends_on = r.id
    UNION
    SELECT d.step_id FROM step_dependencies d JOIN downstream x ON d.depends_on = x.id
),
unskipped AS (
    UPDATE steps s SET status = 'pending', error = NULL, finished_at = NULL, updated_at = now()
    FROM downstream x WHERE s.id = x.id AND s.status = 'skipped'
    RETURNING s.id
),
reopened AS (
    UPDATE workflow_runs w
    SET status = 'running', finished_at = NULL, updated_at = now(),
        steps_unfinished = w.steps_unfinished + 1 + (SELECT count(*) FROM unskipped)::int,
        steps_failed = w.steps_failed - (CASE WHEN t.was = 'failed' THEN 1 ELSE 0 END),
        steps_cancelled = w.steps_cancelled - (CASE WHEN t.was = 'cancelled' THEN 1 ELSE 0 END)
    FROM target t WHERE w.id = t.run_id
)
SELECT (SELECT count(*) FROM revived) + (SELECT count(*) FROM unskipped)";

impl Store {
    /// Retries a failed or cancelled step by hand (`rara retry`): it gets a new attempt
    /// budget and is due at once; the dependents it had skipped come back; its run runs
    /// again. Returns how many steps came back (0: the step had not failed or been cancelled).
    pub async fn retry_step(&self, step_id: Uuid) -> Result<u64, Error> {
        let revived: i64 = sqlx::query_scalar(RETRY_STEP).bind(step_id).fetch_one(&self.pool).await?;
        if revived == 0 && !self.step_exists(step_id).await? {
            return Err(Error::StepNotFound(step_id));
        }
        if revived > 0 {
            self.notify_due().await?;
        }
        Ok(revived as u64)
    }
}
