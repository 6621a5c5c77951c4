//! Bounded history: finished runs older than a retention are deleted, a batch at a time, with
//! everything under them (statement triggers: `workflow_runs`' deletes their steps, `steps`'
//! their attempts, dependencies, artifacts and waits).
//! The scheduler's maintenance deletes one batch a second (`RARA_RETENTION_DAYS`,
//! `RARA_PRUNE_BATCH_SIZE`); `rara prune` deletes batches until none is left. A batch selects its
//! runs `FOR UPDATE SKIP LOCKED` and only finished ones: no step of a finished run is held, so a
//! batch never waits for, nor blocks, a claim or an outcome. With [`Prune::Archive`]
//! (`RARA_ARCHIVE=true`) the same statement first copies each run and everything under it into the
//! `archived_*` tables. With an artifact store the statement also queues the runs in
//! `artifact_deletions`; the caller deletes their objects after ([`Store::artifact_deletions`]),
//! and what fails stays queued for the next prune.

use std::time::Duration;

use serde::Serialize;

use crate::{Error, Store, millis};

/// What becomes of pruned runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Prune {
    /// Deleted.
    #[default]
    Delete,
    /// Copied into the `archived_*` tables, then deleted, in one statement.
    Archive,
}

/// Runs, and the steps under them, deleted by a batch (or that a batch would delete).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Pruned {
    pub runs: u64,
    pub steps: u64,
}

impl std::ops::AddAssign for Pruned {
    fn add_assign(&mut self, p: Pruned) {
        self.runs += p.runs;
        self.steps += p.steps;
    }
}

impl Store {
    /// Deletes up to `limit` finished runs whose `finished_at` is more than `older_than`
    /// before the database's `now()`, oldest first, with their steps, dependencies, attempts
    /// and artifacts. Runs another transaction holds are skipped; a short batch therefore does
    /// not prove that nothing is left.
    pub async fn prune_finished(&self, older_than: Duration, limit: u32) -> Result<Pruned, Error> {
        self.prune(older_than, limit, Prune::Delete).await
    }

    /// [`prune_finished`](Self::prune_finished), archiving the runs first when `how` says so.
    pub async fn prune(&self, older_than: Duration, limit: u32, how: Prune) -> Result<Pruned, Error> {
        self.prune_queueing(older_than, limit, how, false).await
    }

    /// [`prune`](Self::prune); with `objects` (an artifact store is configured) the pruned runs
    /// are queued, in the same statement, for their objects to be deleted
    /// ([`artifact_deletions`](Self::artifact_deletions)).
    pub async fn prune_queueing(
        &self,
        older_than: Duration,
        limit: u32,
        how: Prune,
        objects: bool,
    ) -> Result<Pruned, Error> {
        let (older_than, limit) = (millis(older_than), i64::from(limit));
        let (runs, steps) = match how {
            Prune::Delete => {
                let row =
                    sqlx::query_file!("sql/prune_runs.sql", older_than, limit, objects).fetch_one(&self.pool).await?;
                (row.runs, row.steps)
            }
            Prune::Archive => {
                let row = sqlx::query_file!("sql/prune_archive_runs.sql", older_than, limit, objects)
                    .fetch_one(&self.pool)
                    .await?;
                (row.runs, row.steps)
            }
        };
        Ok(Pruned { runs: count(runs), steps: count(steps) })
    }

    /// What [`prune_finished`](Self::prune_finished) would delete with no limit; reads only.
    pub async fn prunable(&self, older_than: Duration) -> Result<Pruned, Error> {
        let row = sqlx::query_file!("sql/prunable_runs.sql", millis(older_than)).fetch_one(&self.pool).await?;
        Ok(Pruned { runs: count(row.runs), steps: count(row.steps) })
    }
}

impl Store {
    /// Up to `limit` pruned runs whose objects are still to delete, the oldest first.
    pub async fn artifact_deletions(&self, limit: u32) -> Result<Vec<uuid::Uuid>, Error> {
        let rows = sqlx::query_file_scalar!("sql/artifact_deletions_pending.sql", i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        Ok(rows)
    }

    /// The runs whose objects are deleted: dropped from the queue.
    pub async fn artifact_deletions_done(&self, runs: &[uuid::Uuid]) -> Result<(), Error> {
        sqlx::query_file!("sql/artifact_deletions_done.sql", runs).execute(&self.pool).await?;
        Ok(())
    }

    /// The runs whose objects could not be deleted, and why: kept for the next prune.
    pub async fn artifact_deletions_failed(&self, runs: &[uuid::Uuid], why: &str) -> Result<(), Error> {
        sqlx::query_file!("sql/artifact_deletions_failed.sql", runs, why).execute(&self.pool).await?;
        Ok(())
    }
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}
