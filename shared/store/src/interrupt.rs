//! Giving back a running step: a runner that stops (SIGTERM, Ctrl-C) before its executions
//! finish releases them, fenced like every write after a claim (`sql/release_running.sql`).
//! The step is due again at once for any executor (its token cleared, so the old message is
//! stale); the interrupted attempt is closed with the reason and does not count against the
//! step's budget.

use rara_domain::StepError;
use uuid::Uuid;

use crate::fence::{self, Holder};
use crate::{DUE_CHANNEL, Error, Store, sql};

impl Store {
    /// Releases running steps this worker still holds: each is due again at once, its
    /// interrupted attempt closed with `error` and given back. One result per holder, in
    /// order; a holder that no longer holds its step gets `LeaseLost`.
    pub async fn release_running(
        &self,
        holders: &[Holder],
        error: &StepError,
    ) -> Result<Vec<Result<(), Error>>, Error> {
        let holders: Vec<&Holder> = holders.iter().collect();
        let columns = fence::columns(&holders);
        let landed: Vec<Uuid> = sqlx::query_scalar(sql::RELEASE_RUNNING.as_str())
            .bind(&columns.step_ids)
            .bind(&columns.workers)
            .bind(&columns.fences)
            .bind(error.to_json())
            .bind(DUE_CHANNEL)
            .fetch_all(&self.pool)
            .await?;
        Ok(fence::per_holder(&holders, &landed))
    }
}
