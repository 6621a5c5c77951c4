//! The lease statement reads the partial index `steps_due`, however much finished history
//! the table holds (DESIGN.md "Staying fast").

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use rara_store::Store;
use rara_store::lease::LEASE_DUE;
use sqlx::PgPool;

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn lease_statement_uses_the_partial_due_index(pool: PgPool) {
    let store = Store::new(pool.clone());
    for _ in 0..4 {
        store.submit(&flat_plan(5000)).await.unwrap();
    }
    // Most of the history is finished; a few steps are due.
    sqlx::query("UPDATE steps SET status = 'succeeded', finished_at = now() WHERE position >= 20")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("ANALYZE steps").execute(&pool).await.unwrap();

    let plan: serde_json::Value = sqlx::query_scalar(&format!("EXPLAIN (FORMAT JSON) {LEASE_DUE}"))
        .bind(10_i64)
        .bind("scheduler")
        .bind(60_000_i64)
        .fetch_one(&pool)
        .await
        .unwrap();
    let text = plan.to_string();
    assert!(text.contains("\"Index Name\":\"steps_due\""), "the lease must scan steps_due:\n{text}");
    assert!(!text.contains("\"Node Type\":\"Seq Scan\""), "no sequential scan of steps:\n{text}");
    assert_eq!(store.lease_due("scheduler", 1000, LEASE).await.unwrap().len(), 80);
}
