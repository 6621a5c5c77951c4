//! The hot tables are analyzed once they outgrow their statistics, and only then, so cached
//! generic plans are rebuilt for the table as it is (`rara_store::statistics`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use rara_store::Store;
use sqlx::PgPool;

async fn reltuples(pool: &PgPool, table: &str) -> f32 {
    sqlx::query_scalar("SELECT reltuples FROM pg_class WHERE oid = $1::regclass")
        .bind(table)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn grown_tables_are_analyzed_once_then_left_alone(pool: PgPool) {
    let store = Store::new(pool.clone());
    assert_eq!(store.refresh_grown_statistics().await.unwrap(), Vec::<String>::new(), "nothing changed yet");
    assert_eq!(reltuples(&pool, "steps").await, -1.0, "a new table has never been analyzed");

    for _ in 0..3 {
        store.submit(&flat_plan(1000)).await.unwrap();
    }
    // Backends publish their table statistics within seconds of going idle.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let analyzed = loop {
        let analyzed = store.refresh_grown_statistics().await.unwrap();
        if analyzed.iter().any(|t| t == "steps") || tokio::time::Instant::now() > deadline {
            break analyzed;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(analyzed.contains(&"steps".to_owned()), "3,000 new steps outgrow the statistics: {analyzed:?}");
    assert_eq!(reltuples(&pool, "steps").await, 3000.0, "ANALYZE counted the table");
    // workflow_runs got 3 rows: far below the minimum number of changes.
    assert!(!analyzed.contains(&"workflow_runs".to_owned()), "{analyzed:?}");

    // Nothing changed since: nothing to do, however often the scheduler asks.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!store.refresh_grown_statistics().await.unwrap().contains(&"steps".to_owned()));
}
