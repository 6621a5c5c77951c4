//! The console overview's reads (`rara_store::overview`): what they count, over a history set by
//! the test (`explain.rs` proves each reads through an index).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use chrono::{Duration, Utc};
use common::*;
use rara_store::overview::Window;
use sqlx::PgPool;

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_overview_counts_attempts_by_minute_operation_and_error(pool: PgPool) {
    // One attempt every 9 s: 400 in the last hour (the 20,000th is 50 hours back).
    let store = overview_history(&pool, 9).await;
    let at = Utc::now();
    let hour = Window { from: at - Duration::hours(1), to: at };
    let chart = store.overview_chart(hour, 60).await.unwrap();
    let total: i64 = chart.iter().map(|b| b.succeeded + b.retried + b.failed).sum();
    assert!((399..=400).contains(&total), "{total} attempts in the hour");
    assert!(chart.iter().all(|b| (0..60).contains(&b.bucket)), "{chart:?}");
    assert!(chart.iter().all(|b| b.succeeded + b.retried + b.failed <= 7), "9 s apart: at most 7 a minute");
    let (retried, failed): (i64, i64) = chart.iter().fold((0, 0), |(r, f), b| (r + b.retried, f + b.failed));
    assert!(retried == 32 && (7..=8).contains(&failed), "{retried} retried, {failed} failed");

    let operations = store.overview_operations(hour, 10).await.unwrap();
    assert_eq!(operations.len(), 1);
    assert_eq!((operations[0].operation.as_str(), operations[0].attempts), ("noop", total));
    assert_eq!(operations[0].failures, retried + failed);
    let p50 = operations[0].p50_ms.unwrap();
    assert!((19.0..=21.0).contains(&p50), "p50 {p50} ms");

    let errors = store.overview_errors(hour, 10).await.unwrap();
    let codes: Vec<(Option<&str>, i64)> = errors.iter().map(|e| (e.code.as_deref(), e.attempts)).collect();
    assert_eq!(codes, vec![(Some("E_FLAKY"), retried), (Some("E_DOWN"), failed)]);
    assert_eq!(errors[1].runs.len(), 5, "five of the runs it failed in");

    let now = store.overview_now(hour).await.unwrap();
    let together = store.overview(hour, hour, 60, 10).await.unwrap();
    assert_eq!(
        (together.chart, together.operations, together.errors, together.now),
        (chart.clone(), operations.clone(), errors.clone(), now),
        "one transaction reads the same"
    );
    assert_eq!((now.running, now.failed, now.waiting, now.due), (10, 3, 0, 0), "{now:?}");
}
