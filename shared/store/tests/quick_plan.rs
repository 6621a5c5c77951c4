//! Issue 50, the cliff: a batch of 1,000 quick steps behind a backlog of 20,000 leased ones,
//! with statistics taken while every step was pending (autovacuum off, or not yet run: the
//! planner then believes `status = 'leased'` matches one row). The quick path's lock and
//! record statements and the ordinary claim must read about one row of `steps` per step of the
//! batch, however many leased steps the table holds; before, each walked every leased step of
//! the table against the whole batch (4 s per statement at 20,000: batch 100 × 10 steps per
//! message ran 50× slower than batch 10). Measured from `EXPLAIN ANALYZE` (rows read, not
//! time).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use rara_store::Store;
use rara_store::sql::QUICK_SUCCEED_LEAVES;
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

const QUICK_LOCK: &str = include_str!("../sql/quick_lock.sql");
const BACKLOG: usize = 20_000;
const BATCH: usize = 1_000;

/// Rows of `steps` a JSON plan read: each scan node's rows (returned and filtered out) times
/// its loops.
fn steps_rows_read(plan: &Value) -> f64 {
    match plan {
        Value::Object(node) => {
            let own = if node.get("Relation Name").and_then(Value::as_str) == Some("steps") {
                let rows = node.get("Actual Rows").and_then(Value::as_f64).unwrap_or(0.0)
                    + node.get("Rows Removed by Filter").and_then(Value::as_f64).unwrap_or(0.0);
                rows * node.get("Actual Loops").and_then(Value::as_f64).unwrap_or(1.0)
            } else {
                0.0
            };
            own + node.values().map(steps_rows_read).sum::<f64>()
        }
        Value::Array(items) => items.iter().map(steps_rows_read).sum(),
        _ => 0.0,
    }
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_quick_path_and_the_claim_read_a_row_per_step_behind_a_backlog_with_stale_statistics(pool: PgPool) {
    let store = Store::new(pool.clone());
    for _ in 0..BACKLOG / 5000 {
        store.submit(&flat_plan(5000)).await.unwrap();
    }
    // Statistics of a table whose steps are all pending; then the scheduler leases them all.
    sqlx::query("ANALYZE steps").execute(&pool).await.unwrap();
    let mut leased = Vec::new();
    while leased.len() < BACKLOG {
        let round = store.lease_due("scheduler", 1000, LEASE).await.unwrap();
        assert!(!round.is_empty(), "only {} of {BACKLOG} leased", leased.len());
        leased.extend(round);
    }
    let batch = &leased[leased.len() - BATCH..];
    let ids: Vec<Uuid> = batch.iter().map(|l| l.step_id).collect();
    let tokens: Vec<Uuid> = batch.iter().map(|l| l.lease_token).collect();
    let operations = vec![batch[0].operation.clone()];

    let mut tx = pool.begin().await.unwrap();
    let lock: Value = sqlx::query_scalar(&format!("EXPLAIN (ANALYZE, FORMAT JSON) {QUICK_LOCK}"))
        .bind(&ids)
        .bind(&tokens)
        .bind(&operations)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    let locked = lock[0]["Plan"]["Actual Rows"].as_f64().unwrap();
    assert_eq!(locked as usize, BATCH, "every step of the batch is locked:\n{lock}");
    let read = steps_rows_read(&lock);
    assert!(read <= 2.0 * BATCH as f64, "quick_lock read {read} rows of steps for {BATCH} steps:\n{lock}");

    // The record, in the transaction that holds the locks (as QuickBatch::succeed does).
    let fences: Vec<i64> = (1..=BATCH as i64).collect();
    let outputs: Vec<Value> = vec![Value::Null; BATCH];
    let record: Value =
        sqlx::query_scalar(&format!("EXPLAIN (ANALYZE, FORMAT JSON) {}", QUICK_SUCCEED_LEAVES.as_str()))
            .bind(&ids)
            .bind(&tokens)
            .bind(&fences)
            .bind(&outputs)
            .bind("executor")
            .bind(chrono::Utc::now())
            .fetch_one(&mut *tx)
            .await
            .unwrap();
    let read = steps_rows_read(&record);
    assert!(read <= 3.0 * BATCH as f64, "quick_succeed read {read} rows of steps for {BATCH} steps:\n{record}");
    let succeeded: i64 =
        sqlx::query_scalar("SELECT count(*) FROM steps WHERE status = 'succeeded'").fetch_one(&mut *tx).await.unwrap();
    assert_eq!(succeeded as usize, BATCH, "the record wrote each step of the batch");
    tx.rollback().await.unwrap();

    // The ordinary claim of the same batch (steps that are not quick take this path).
    let mut tx = pool.begin().await.unwrap();
    let claim: Value = sqlx::query_scalar(&format!("EXPLAIN (ANALYZE, FORMAT JSON) {}", rara_store::sql::CLAIM))
        .bind(&ids)
        .bind(&tokens)
        .bind("executor")
        .bind(60_000_i64)
        .bind(serde_json::json!({}))
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    let claimed = claim[0]["Plan"]["Actual Rows"].as_f64().unwrap();
    assert_eq!(claimed as usize, BATCH, "every step of the batch is claimed:\n{claim}");
    let read = steps_rows_read(&claim);
    assert!(read <= 3.0 * BATCH as f64, "the claim read {read} rows of steps for {BATCH} steps:\n{claim}");
    tx.rollback().await.unwrap();
}
