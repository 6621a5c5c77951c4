//! Test and benchmark support (feature `testing`): finished history written in bulk.
//!
//! A benchmark of the hot path against millions of finished steps cannot submit and run
//! them one by one; these statements write them as the store leaves them: status
//! `succeeded`, one finished attempt each, in runs of [`HISTORY_RUN_SIZE`] steps whose run
//! `succeeded`. History ids are time-ordered like the store's own (UUIDv7) and older than
//! any fresh step; fences are negative, below any issued by the sequence. Never used by the
//! functions: only `rara-bench` and tests enable the feature.

use sqlx::PgPool;

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
    sqlx::query(
        "INSERT INTO workflow_runs (id, name, status, steps_total, steps_unfinished, finished_at)
         SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(r), 12, '0'))::uuid, 'history', 'succeeded', $3, 0, now()
         FROM generate_series($1 / $3, ($2 - 1) / $3) r
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(from)
    .bind(to)
    .bind(run_size)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO steps (id, run_id, name, position, operation, input, status, attempt, max_attempts,
                            timeout_seconds, retry_initial_delay_ms, retry_max_delay_ms, retry_multiplier,
                            output, created_at, updated_at, finished_at)
         SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'))::uuid,
                ('00000000-0000-7000-8000-' || lpad(to_hex(i / $3), 12, '0'))::uuid,
                's' || (i % $3), (i % $3)::int, 'noop', '{}', 'succeeded', 1, 3, 300, 1000, 300000, 2,
                '{}', now(), now(), now()
         FROM generate_series($1, $2 - 1) i",
    )
    .bind(from)
    .bind(to)
    .bind(run_size)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO step_attempts (step_id, attempt, fence, leased_by, lease_token, outcome, started_at, finished_at)
         SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'))::uuid, 1, -i, 'history',
                gen_random_uuid(), 'succeeded', now(), now()
         FROM generate_series($1, $2 - 1) i",
    )
    .bind(from)
    .bind(to)
    .execute(&mut *tx)
    .await?;
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
