//! The scheduler's maintenance deletes a slice of finished runs past `RARA_RETENTION_DAYS`
//! every `PRUNE_INTERVAL` and counts them as `Pruned`; `0` keeps history forever. A running
//! scheduler prunes beside its lease rounds, never before them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use rara_queue::Queue;
use rara_store::Store;
use sqlx::PgPool;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

const WORKFLOW: &str = "name: history\nsteps:\n  - {name: a, operation: noop}\n";

/// A run cancelled `days` ago (its `finished_at` moved back).
async fn cancelled_days_ago(store: &Store, settings: &rara_runtime::settings::Settings, days: i32) -> Uuid {
    let run_id = submit(store, settings, WORKFLOW).await;
    store.cancel_run(run_id, "test").await.unwrap();
    sqlx::query("UPDATE workflow_runs SET finished_at = now() - make_interval(days => $2) WHERE id = $1")
        .bind(run_id)
        .bind(days)
        .execute(store.pool())
        .await
        .unwrap();
    run_id
}

async fn exists(store: &Store, run_id: Uuid) -> bool {
    store.run(run_id).await.is_ok()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_maintenance_pass_prunes_one_batch_of_runs_past_the_retention(pool: PgPool) {
    let (store, _queues, stack) = Stack::fresh(
        pool,
        &[("RARA_RETENTION_DAYS", "7"), ("RARA_PRUNE_BATCH_SIZE", "1"), ("RARA_REAP_INTERVAL_MS", "0")],
    )
    .await;
    let old =
        [cancelled_days_ago(&store, &stack.settings, 9).await, cancelled_days_ago(&store, &stack.settings, 8).await];
    let recent = cancelled_days_ago(&store, &stack.settings, 6).await;
    let scheduler = stack.scheduler();

    let first = scheduler.pass().await.unwrap();
    assert_eq!((first.reaper_runs, first.pruned), (1, 1), "one batch of one run per pass: {first:?}");
    assert!(!exists(&store, old[0]).await, "the oldest first");
    assert!(exists(&store, old[1]).await);
    let second = scheduler.pass().await.unwrap();
    assert_eq!(second.pruned, 1, "{second:?}");
    assert!(!exists(&store, old[1]).await);
    assert_eq!(scheduler.pass().await.unwrap().pruned, 0, "nothing past the retention is left");
    assert!(exists(&store, recent).await, "a run finished 6 days ago stays with a 7-day retention");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_retention_of_0_days_keeps_history_forever(pool: PgPool) {
    let (store, _queues, stack) = Stack::fresh(pool, &[("RARA_RETENTION_DAYS", "0")]).await;
    let ancient = cancelled_days_ago(&store, &stack.settings, 4000).await;
    let counters = stack.scheduler().pass().await.unwrap();
    assert_eq!((counters.reaper_runs, counters.pruned), (1, 0), "{counters:?}");
    assert!(exists(&store, ancient).await);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn with_rara_archive_the_pass_copies_the_runs_it_prunes(pool: PgPool) {
    let (store, _queues, stack) = Stack::fresh(pool, &[("RARA_RETENTION_DAYS", "7"), ("RARA_ARCHIVE", "true")]).await;
    let old = cancelled_days_ago(&store, &stack.settings, 8).await;
    assert_eq!(stack.scheduler().pass().await.unwrap().pruned, 1);
    assert!(!exists(&store, old).await);
    let copies: i64 = sqlx::query_scalar("SELECT count(*) FROM archived_workflow_runs WHERE id = $1")
        .bind(old)
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(copies, 1);
}

/// The prune of a running scheduler does not stand between a due step and its message: held
/// up by a lock on the archive (`RARA_ARCHIVE=true` copies before deleting), it waits in the
/// maintenance task while the lease rounds send a newly submitted step; it finishes when the
/// lock goes, and its count reaches the run's counters.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_held_up_prune_does_not_delay_leasing(pool: PgPool) {
    let (store, queues, stack) =
        Stack::fresh(pool.clone(), &[("RARA_RETENTION_DAYS", "7"), ("RARA_ARCHIVE", "true")]).await;
    let old = cancelled_days_ago(&store, &stack.settings, 8).await;
    let mut lock = pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE archived_workflow_runs IN SHARE MODE").execute(&mut *lock).await.unwrap();

    let stop = CancellationToken::new();
    let scheduler = stack.scheduler();
    let task = tokio::spawn({
        let stop = stop.clone();
        async move { scheduler.run(None, stop).await }
    });
    let within = Duration::from_secs(10);
    rara_testkit::eventually_within("the scheduler's prune waits for the lock", within, || {
        prune_waits_for_a_lock(&pool)
    })
    .await;

    submit(&store, &stack.settings, WORKFLOW).await;
    let received = queues.queue().receive(1, Duration::from_secs(10)).await.unwrap();
    assert_eq!(received.len(), 1, "the new step was sent while the prune waited");
    assert!(prune_waits_for_a_lock(&pool).await, "and the prune is still waiting");
    assert!(exists(&store, old).await);

    lock.commit().await.unwrap();
    rara_testkit::eventually_within("the prune finishes once the lock went", Duration::from_secs(10), || async {
        !exists(&store, old).await
    })
    .await;
    stop.cancel();
    let counters = task.await.unwrap().unwrap();
    assert_eq!((counters.sent, counters.pruned), (1, 1), "{counters:?}");
}

/// Whether this database's prune statement waits for a lock.
async fn prune_waits_for_a_lock(pool: &PgPool) -> bool {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE datname = current_database() \
         AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO archived_workflow_runs%')",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

/// With an artifact store, the pass deletes a pruned run's objects after its rows: the
/// scheduler's own S3 calls (`ListObjectsV2` under `runs/{run}/`, `DeleteObjects`), which the
/// IAM check evaluates against `SchedulerRole` when `RARA_AWS_CALL_LOG` is set.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn with_an_artifact_store_the_pass_deletes_the_pruned_runs_objects(pool: PgPool) {
    use rara_artifacts::Key;
    let (store, _queues, stack) = Stack::fresh(pool, &[("RARA_RETENTION_DAYS", "7")]).await;
    let (artifacts, _) = rara_testkit::s3_store("retention").await;
    let (old, recent) =
        (cancelled_days_ago(&store, &stack.settings, 8).await, cancelled_days_ago(&store, &stack.settings, 6).await);
    for run in [old, recent] {
        let key = Key::output(run, Uuid::new_v4(), 1);
        artifacts.put(&key, rara_artifacts::port::reader_of(vec![1; 100]), None).await.unwrap();
    }
    let scheduler = stack.scheduler().with_artifacts(artifacts.clone());
    assert_eq!(scheduler.pass().await.unwrap().pruned, 1);
    assert!(!exists(&store, old).await);
    assert!(artifacts.list(&Key::run(old), 10).await.unwrap().is_empty(), "the pruned run's object is gone");
    assert_eq!(artifacts.list(&Key::run(recent), 10).await.unwrap().len(), 1, "a kept run's object stays");
}
