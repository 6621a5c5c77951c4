//! Bulk retry of 10,000 failed steps in a 1,000,000-step database, as `POST /api/bulk/retry`
//! with `{"status": "failed"}` runs it (docs/benchmarks/journal/2026-12-06-bulk-retry.md).
//!
//! ```text
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/rara_bulk \
//!   cargo run --release -q -p rara-store --example bulk_retry -- [per-step|batched] [--no-index]
//! ```
//!
//! On first use it migrates the database and fills it (`bulk_retry.sql`, then `ANALYZE`); each
//! run fails the 10,000 steps again first. `per-step` is the action as it was: the search, then
//! one `retry_step` per step; `batched` is `retry_steps`, 1,000 steps a statement.
//! `--no-index` drops `steps_retryable` first (the search as it was); without it the index is
//! created if missing. Prints the plan of the search (`EXPLAIN (ANALYZE, BUFFERS)`) and the
//! times.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::Instant;

use rara_domain::state::RunStatus;
use rara_store::Store;
use rara_store::browse::RunFilter;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let batched = args.iter().any(|a| a == "batched");
    let no_index = args.iter().any(|a| a == "--no-index");
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL");
    let store = Store::connect(&url, 2).await.unwrap();
    store.migrate().await.unwrap();
    let pool = store.pool();
    let steps: i64 = sqlx::query_scalar("SELECT count(*) FROM steps").fetch_one(pool).await.unwrap();
    if steps == 0 {
        let started = Instant::now();
        sqlx::raw_sql(include_str!("bulk_retry.sql")).execute(pool).await.unwrap();
        sqlx::query("ANALYZE steps, step_names, workflow_runs").execute(pool).await.unwrap();
        println!("filled and analyzed in {:.1} s", started.elapsed().as_secs_f64());
    }
    let index = if no_index {
        "DROP INDEX IF EXISTS steps_retryable"
    } else {
        "CREATE INDEX IF NOT EXISTS steps_retryable ON steps (run_id) WHERE status IN ('failed', 'cancelled')"
    };
    sqlx::query(index).execute(pool).await.unwrap();
    fail_again(&store).await;

    let filter = RunFilter { status: Some(RunStatus::Failed), ..RunFilter::default() };
    let plan: Vec<String> =
        sqlx::query_scalar(&format!("EXPLAIN (ANALYZE, BUFFERS) {}", rara_store::sql::RETRYABLE_STEPS))
            .bind(RunStatus::Failed)
            .bind(None::<String>)
            .bind(None::<chrono::DateTime<chrono::Utc>>)
            .bind(None::<chrono::DateTime<chrono::Utc>>)
            .fetch_all(pool)
            .await
            .unwrap();
    println!("{}", plan.join("\n"));

    let started = Instant::now();
    let ids = store.retryable_steps(&filter).await.unwrap();
    let searched = started.elapsed();
    let mut revived = 0;
    if batched {
        for batch in ids.chunks(1_000) {
            revived += store.retry_steps(batch).await.unwrap();
        }
    } else {
        for id in &ids {
            revived += store.retry_step(*id).await.unwrap();
        }
    }
    let total = started.elapsed();
    println!(
        "{}{}: {} steps matched, {revived} back; search {:.3} s, total {:.3} s",
        if batched { "batched" } else { "per-step" },
        if no_index { " (no index)" } else { "" },
        ids.len(),
        searched.as_secs_f64(),
        total.as_secs_f64()
    );
}

/// The 10,000 steps of the `broken` runs failed again, their runs failed, as the data set left
/// them.
async fn fail_again(store: &Store) {
    sqlx::raw_sql(
        "UPDATE steps s SET status = 'failed', attempt = 3, max_attempts = 3, output = NULL, finished_at = now(),
                error = '{\"code\": \"BOOM\", \"message\": \"failed on purpose\", \"retryable\": false}'
         FROM step_names n JOIN workflow_runs r ON r.id = n.run_id
         WHERE r.name = 'broken' AND s.id = n.step_id;
         UPDATE workflow_runs SET status = 'failed', steps_unfinished = 0, steps_failed = 1000, steps_cancelled = 0,
                finished_at = now()
         WHERE name = 'broken';",
    )
    .execute(store.pool())
    .await
    .unwrap();
}
