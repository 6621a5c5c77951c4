//! The scheduler's transitions: lease due steps, give a lease back when its message could
//! not be sent, and reap leases that expired with their message gone.

use std::sync::LazyLock;
use std::time::Duration;

use rara_domain::StepError;
use rara_domain::step_error::codes;
use uuid::Uuid;

use crate::outcome::finish_statement;
use crate::{Error, Store, millis};

/// A step the scheduler leased; its message carries `step_id` and `lease_token` only.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Leased {
    pub step_id: Uuid,
    pub run_id: Uuid,
    pub lease_token: Uuid,
}

/// What one reaper pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Reaped {
    /// Leased steps whose message never claimed them: back to pending, no attempt used.
    pub released_leased: u64,
    /// Running steps whose holder vanished, with attempts left: back to pending.
    pub released_running: u64,
    /// Running steps whose holder vanished on their last attempt: failed with `LEASE_EXPIRED`.
    pub failed: u64,
}

impl Reaped {
    pub fn total(&self) -> u64 {
        self.released_leased + self.released_running + self.failed
    }
}

/// The lease statement (public so tests and `rara explain` can EXPLAIN it). `$1`: limit, `$2`: holder, `$3`: lease in ms.
pub const LEASE_DUE: &str = "
WITH due AS (
    SELECT id FROM steps
    WHERE status = 'pending' AND pending_deps = 0 AND next_run_at <= now()
    ORDER BY next_run_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
UPDATE steps s
SET status = 'leased', leased_by = $2, lease_token = gen_random_uuid(),
    lease_expires_at = now() + $3 * interval '1 millisecond', updated_at = now()
FROM due
WHERE s.id = due.id
RETURNING s.id AS step_id, s.run_id, s.lease_token";

/// Public for the plan tests (`tests/explain.rs`).
pub const RELEASE: &str = "
UPDATE steps s
SET status = 'pending', leased_by = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = now()
FROM unnest($1::uuid[], $2::uuid[]) AS t(step_id, lease_token)
WHERE s.id = t.step_id AND s.lease_token = t.lease_token AND (s.status = 'leased') IS TRUE";

const REAP_RELEASE: &str = "
WITH expired AS (
    SELECT id, status AS was FROM steps
    WHERE status IN ('leased', 'running') AND lease_expires_at <= now()
      AND (status = 'leased' OR attempt < max_attempts)
    ORDER BY lease_expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
),
back AS (
    UPDATE steps s
    SET status = 'pending', leased_by = NULL, lease_token = NULL, lease_expires_at = NULL,
        next_run_at = greatest(s.next_run_at, now()), updated_at = now(),
        error = CASE WHEN e.was = 'running' THEN $2::jsonb ELSE s.error END
    FROM expired e
    WHERE s.id = e.id
    RETURNING s.id, s.attempt, e.was
),
closed AS (
    UPDATE step_attempts a
    SET outcome = 'lease_expired', finished_at = now(), error = $2::jsonb
    FROM back b
    WHERE b.was = 'running' AND a.step_id = b.id AND a.attempt = b.attempt AND a.outcome = 'running'
)
SELECT count(*) FILTER (WHERE was = 'leased') AS leased, count(*) FILTER (WHERE was = 'running') AS running
FROM back";

impl Store {
    /// Leases up to `limit` due steps for `holder`, oldest first, in one statement.
    pub async fn lease_due(&self, holder: &str, limit: u32, lease: Duration) -> Result<Vec<Leased>, Error> {
        Ok(sqlx::query_as(LEASE_DUE)
            .bind(i64::from(limit))
            .bind(holder)
            .bind(millis(lease))
            .fetch_all(&self.pool)
            .await?)
    }

    /// Gives leases back (their messages could not be sent): the steps are due again at once.
    /// A lease that changed meanwhile is left alone. Returns how many were released.
    pub async fn release(&self, leases: &[(Uuid, Uuid)]) -> Result<u64, Error> {
        let (ids, tokens): (Vec<Uuid>, Vec<Uuid>) = leases.iter().copied().unzip();
        Ok(sqlx::query(RELEASE).bind(&ids).bind(&tokens).execute(&self.pool).await?.rows_affected())
    }

    /// Returns steps whose lease expired (DESIGN.md "Lease ownership", the reaper): leased ones
    /// and running ones with attempts left go back to pending with their token cleared (any
    /// late message is stale); running ones on their last attempt fail with `LEASE_EXPIRED`.
    pub async fn reap_expired(&self, limit: u32) -> Result<Reaped, Error> {
        let error =
            StepError::retryable(codes::LEASE_EXPIRED, "the holder's lease expired before it recorded an outcome")
                .to_json();
        let (leased, running): (i64, i64) =
            sqlx::query_as(REAP_RELEASE).bind(i64::from(limit)).bind(&error).fetch_one(&self.pool).await?;

        let final_error =
            StepError::permanent(codes::LEASE_EXPIRED, "the holder's lease expired on the last attempt").to_json();
        let failed: Vec<Uuid> = sqlx::query_scalar(REAP_FAIL.as_str())
            .bind(i64::from(limit))
            .bind(&final_error)
            .fetch_all(&self.pool)
            .await?;
        Ok(Reaped { released_leased: leased as u64, released_running: running as u64, failed: failed.len() as u64 })
    }
}

/// Running steps on their last attempt whose lease expired. `$1`: limit, `$2`: the error.
const REAP_FAIL_TARGETS: &str = "
    SELECT id, 'failed'::rara_step_status AS new_status, $2::jsonb AS error,
           'lease_expired'::rara_attempt_outcome AS attempt_outcome
    FROM steps
    WHERE status = 'running' AND lease_expires_at <= now() AND attempt >= max_attempts
    ORDER BY lease_expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED";

static REAP_FAIL: LazyLock<String> = LazyLock::new(|| finish_statement(REAP_FAIL_TARGETS));
