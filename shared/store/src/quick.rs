//! Quick steps (DESIGN.md "Quick steps"): the steps of a batch whose in-process executor is
//! [quick](rara_domain::executor::Executor::quick) are locked, run and recorded in one
//! transaction. The row lock that transaction holds is their claim: no other worker can change
//! them while they run, and nothing is written until they succeeded, when one statement turns
//! each from `leased` into `succeeded` under the claim's conditions and writes its attempt's
//! one row. If the transaction does not commit, nothing was written: the steps are leased as
//! before and the ordinary claim takes them (they may run again, which a quick executor allows).
//! The commit waits for the WAL flush only when a run ended (DESIGN.md "Quick steps",
//! durability): a success lost in a crash of Postgres leaves its steps leased, and they run
//! again.

use chrono::{DateTime, Utc};
use sqlx::{Postgres, Transaction};
use uuid::Uuid;

use crate::claim::ClaimRequest;
use crate::{DUE_CHANNEL, Error, Store, sql};

/// A step locked for a quick run: what its execution needs.
#[derive(Debug, Clone, PartialEq)]
pub struct QuickStep {
    pub step_id: Uuid,
    pub lease_token: Uuid,
    pub run_id: Uuid,
    pub operation: String,
    pub version: Option<String>,
    pub input: serde_json::Value,
    /// 1-based number of this attempt.
    pub attempt: u32,
    /// The fence of this attempt, drawn by the lock and written with the success.
    pub fence: i64,
    pub map_index: Option<u32>,
}

/// The open transaction that holds the locks of a batch's quick steps. Dropped without
/// [`succeed`](Self::succeed), it rolls back and nothing was written.
pub struct QuickBatch {
    tx: Transaction<'static, Postgres>,
    pub steps: Vec<QuickStep>,
    /// When the attempts started (the lock; the database's clock).
    pub started_at: DateTime<Utc>,
    /// No step depends on any of the requested steps (fixed when they were written): the
    /// successes are recorded without looking for dependents.
    pub leaves: bool,
}

impl std::fmt::Debug for QuickBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuickBatch").field("steps", &self.steps.len()).finish_non_exhaustive()
    }
}

impl Store {
    /// Opens a transaction and locks the requested steps that may run quick (`operations`:
    /// the quick executors' names; see `sql/quick_lock.sql` for which steps). A step requested
    /// twice is locked once.
    pub async fn quick_lock(&self, requests: &[ClaimRequest], operations: &[String]) -> Result<QuickBatch, Error> {
        let mut tx = self.pool.begin().await?;
        let ids: Vec<Uuid> = requests.iter().map(|r| r.step_id).collect();
        let tokens: Vec<Uuid> = requests.iter().map(|r| r.lease_token).collect();
        let rows = sqlx::query_file!("sql/quick_lock.sql", &ids, &tokens, operations).fetch_all(&mut *tx).await?;
        // The same for every row: whether the requested steps have dependents.
        let leaves = rows.first().is_some_and(|r| r.leaves);
        let mut started_at = None;
        let mut steps: Vec<QuickStep> = Vec::with_capacity(rows.len());
        for row in rows {
            started_at.get_or_insert(row.locked_at);
            if steps.iter().any(|s| s.step_id == row.id) {
                continue;
            }
            steps.push(QuickStep {
                step_id: row.id,
                lease_token: row.lease_token,
                run_id: row.run_id,
                operation: row.operation,
                version: row.version,
                input: row.input,
                attempt: u32::try_from(row.attempt).unwrap_or(1),
                fence: row.fence,
                map_index: row.map_index.and_then(|i| u32::try_from(i).ok()),
            });
        }
        Ok(QuickBatch { tx, steps, started_at: started_at.unwrap_or_else(Utc::now), leaves })
    }
}

impl QuickBatch {
    /// Ends the transaction without writing anything, its locks released now (a dropped
    /// batch rolls back too, once its connection is back in the pool).
    pub async fn rollback(self) -> Result<(), Error> {
        Ok(self.tx.rollback().await?)
    }

    /// Records the successes (`(step, output)`, steps of this batch) in one statement and
    /// commits: the dependents released and the runs finished as by [`Store::succeed`] (a
    /// batch none of whose steps has dependents by a statement that does not look for them:
    /// [`QuickBatch::leaves`]). Returns the steps written (all of them: their rows were locked
    /// since they were read).
    pub async fn succeed(
        mut self,
        worker: &str,
        items: &[(&QuickStep, serde_json::Value)],
    ) -> Result<Vec<Uuid>, Error> {
        let ids: Vec<Uuid> = items.iter().map(|(s, _)| s.step_id).collect();
        let tokens: Vec<Uuid> = items.iter().map(|(s, _)| s.lease_token).collect();
        let fences: Vec<i64> = items.iter().map(|(s, _)| s.fence).collect();
        let outputs: Vec<&serde_json::Value> = items.iter().map(|(_, o)| o).collect();
        // Without dependents in the batch, the statement that does not look for them.
        let statement = if self.leaves { sql::QUICK_SUCCEED_LEAVES.as_str() } else { sql::QUICK_SUCCEED.as_str() };
        let query = sqlx::query_scalar(statement)
            .bind(&ids)
            .bind(&tokens)
            .bind(&fences)
            .bind(&outputs)
            .bind(worker)
            .bind(self.started_at);
        let query = if self.leaves { query } else { query.bind(DUE_CHANNEL) };
        let landed: Vec<Uuid> = query.fetch_all(&mut *self.tx).await?;
        self.tx.commit().await?;
        Ok(landed)
    }
}
