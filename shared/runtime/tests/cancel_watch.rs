//! The operator-cancel listener (`rara_runtime::executor::cancel_watch::CancelWatch`) against a real Postgres:
//! batches of short steps cost it no connection; an execution that runs on gets one, hears
//! the cancels, and is told to check its lease once the listener is up.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use rara_runtime::executor::cancel_watch::{CHECK_NOW, CancelWatch, WATCH_START_DELAY};
use rara_store::Store;
use rara_store::listen::CANCEL_CHANNEL;
use sqlx::PgPool;
use uuid::Uuid;

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn batch_after_batch_of_short_steps_opens_no_listener_connection(pool: PgPool) {
    let watch = CancelWatch::new(Store::new(pool));
    // 200 batches of ten steps, each over within a millisecond, back to back.
    for _ in 0..200 {
        let batch: Vec<_> = (0..10).map(|_| watch.subscribe()).collect();
        tokio::time::sleep(Duration::from_millis(1)).await;
        drop(batch);
    }
    // Long enough for any relay started by the last batch to have connected.
    tokio::time::sleep(WATCH_START_DELAY * 3).await;
    assert_eq!(watch.connections(), 0, "a batch shorter than the start delay connected");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn an_execution_that_runs_on_hears_check_now_then_the_cancels(pool: PgPool) {
    let watch = CancelWatch::new(Store::new(pool.clone()));
    let mut running = watch.subscribe();
    let first = tokio::time::timeout(Duration::from_secs(10), running.recv()).await.expect("nothing heard").unwrap();
    assert_eq!(first, CHECK_NOW, "the first word once connected is: check your lease");
    assert_eq!(watch.connections(), 1);

    let step = Uuid::new_v4();
    sqlx::query("SELECT pg_notify($1, $2)").bind(CANCEL_CHANNEL).bind(step.to_string()).execute(&pool).await.unwrap();
    let heard = tokio::time::timeout(Duration::from_secs(10), running.recv()).await.expect("cancel unheard").unwrap();
    assert_eq!(heard, step);

    // The last subscription gone, the listener's connection closes.
    drop(running);
    let listening = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'listen%'",
        )
        .fetch_one(&pool)
        .await
        .unwrap()
    };
    rara_testkit::eventually_within("the listener's connection is closed", Duration::from_secs(10), || async {
        match listening().await {
            0 => Ok(()),
            open => Err(open),
        }
    })
    .await;
}
