//! Giving back a running step: a runner that stops (SIGTERM, Ctrl-C) before its executions
//! finish releases them, fenced like every write after a claim. The step is due again at
//! once for any executor (its token cleared, so the old message is stale), the interrupted
//! attempt is closed with the reason and does not count against the step's budget.

use rara_domain::StepError;
use uuid::Uuid;

use crate::{DUE_CHANNEL, Error, Holder, Store};

/// `$1..$3`: step ids, workers, fences; `$4`: the error; `$5`: the NOTIFY channel.
const RELEASE_RUNNING: &str = "
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[]) AS t(step_id, worker, fence)
),
released AS (
    UPDATE steps s
    SET status = 'pending', next_run_at = now(), leased_by = NULL, lease_token = NULL, lease_expires_at = NULL,
        max_attempts = s.max_attempts + 1, progress = NULL, error = $4, updated_at = now()
    FROM input i
    WHERE s.id = i.step_id AND s.leased_by = i.worker AND s.fence = i.fence AND (s.status = 'running') IS TRUE
    RETURNING s.id, s.attempt
),
closed AS (
    UPDATE step_attempts a SET outcome = 'retrying', error = $4, finished_at = now(), retry_at = now()
    FROM released r WHERE a.step_id = r.id AND a.attempt = r.attempt AND a.outcome = 'running'
),
woke AS (
    SELECT pg_notify($5, '') FROM released LIMIT 1
)
SELECT r.id FROM released r CROSS JOIN (SELECT count(*) FROM woke) w";

impl Store {
    /// Releases running steps this worker still holds: each is due again at once, its
    /// interrupted attempt closed with `error` and given back. One result per holder, in
    /// order; a holder that no longer holds its step gets `LeaseLost`.
    pub async fn release_running(
        &self,
        holders: &[Holder],
        error: &StepError,
    ) -> Result<Vec<Result<(), Error>>, Error> {
        let ids: Vec<Uuid> = holders.iter().map(|h| h.step_id).collect();
        let workers: Vec<&str> = holders.iter().map(|h| h.worker.as_str()).collect();
        let fences: Vec<i64> = holders.iter().map(|h| h.fence).collect();
        let landed: Vec<Uuid> = sqlx::query_scalar(RELEASE_RUNNING)
            .bind(&ids)
            .bind(&workers)
            .bind(&fences)
            .bind(error.to_json())
            .bind(DUE_CHANNEL)
            .fetch_all(&self.pool)
            .await?;
        Ok(holders
            .iter()
            .map(|h| {
                if landed.contains(&h.step_id) {
                    Ok(())
                } else {
                    Err(Error::LeaseLost { step_id: h.step_id, fence: h.fence })
                }
            })
            .collect())
    }
}
