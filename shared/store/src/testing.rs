//! Test and benchmark support (feature `testing`): finished history written in bulk.
//!
//! A benchmark of the hot path against millions of finished steps cannot submit and run
//! them one by one; these statements write them as the store leaves them: status
//! `succeeded`, one finished attempt each, in runs of [`HISTORY_RUN_SIZE`] steps whose run
//! `succeeded`. History ids are time-ordered like the store's own (UUIDv7) and older than
//! any fresh step; fences are negative, below any issued by the sequence. Never used by the
//! functions: only `rara-bench` and tests enable the feature. The statements are
//! `sql/history_*.sql`, in the catalogue like every other.

use sqlx::PgPool;

use crate::sql;

/// Steps per history run (as `rara-bench` submits its flat runs).
pub const HISTORY_RUN_SIZE: u64 = 1000;

/// The tables the history fills, for `VACUUM ANALYZE` once the fill is done.
const HISTORY_TABLES: [&str; 3] = ["steps", "step_attempts", "workflow_runs"];

/// Writes finished steps `from..to` (with their runs and attempts) in one transaction, then
/// refreshes the statistics of the runs and steps: foreign-key checks run on plans made from
/// them, and without fresh ones the check of each new step would scan every run (a plan made
/// when there were few). Call it in chunks of a few hundred thousand rows, as autovacuum
/// would analyze during a slower growth.
pub async fn fill_history(pool: &PgPool, from: u64, to: u64) -> Result<(), sqlx::Error> {
    let (from, to, run_size) = (to_i64(from), to_i64(to), to_i64(HISTORY_RUN_SIZE));
    let mut tx = pool.begin().await?;
    sqlx::query(sql::HISTORY_RUNS).bind(from).bind(to).bind(run_size).execute(&mut *tx).await?;
    sqlx::query(sql::HISTORY_STEPS).bind(from).bind(to).bind(run_size).execute(&mut *tx).await?;
    sqlx::query(sql::HISTORY_ATTEMPTS).bind(from).bind(to).execute(&mut *tx).await?;
    tx.commit().await?;
    sqlx::query("ANALYZE workflow_runs, steps").execute(pool).await?;
    Ok(())
}

/// `VACUUM ANALYZE` of the tables the history filled, as autovacuum would after the fill.
pub async fn vacuum_history(pool: &PgPool) -> Result<(), sqlx::Error> {
    for table in HISTORY_TABLES {
        // Fixed table names.
        sqlx::query(&format!("VACUUM ANALYZE {table}")).execute(pool).await?;
    }
    Ok(())
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
