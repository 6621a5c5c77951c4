//! The scheduler's statistics check against a real Postgres: every second, not on the
//! reaper's timer, so a fresh database's first plans (made while `step_attempts` held a few
//! rows) are made again within about a second of the table outgrowing them; a table that only
//! changed, without growing, is left to autovacuum. And its check of
//! the console's triggers, turned off once no console listens.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use rara_queue::memory::MemoryQueue;
use rara_runtime::metrics::Counters;
use rara_runtime::scheduler::{STATISTICS_INTERVAL, Scheduler};
use rara_runtime::settings::Settings;
use rara_store::Store;
use sqlx::PgPool;
use tokio::time::Instant;

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_scheduler_checks_statistics_every_second_and_reaps_on_its_own_timer(pool: PgPool) {
    let scheduler = scheduler(&pool, "60000");

    let first = scheduler.pass().await.unwrap();
    assert_eq!((first.reaper_runs, first.statistics_checks), (1, 1), "the first pass does both");
    let again = scheduler.pass().await.unwrap();
    assert_eq!((again.reaper_runs, again.statistics_checks), (0, 0), "{again:?}");

    // Only the scheduler analyzes here, wherever the test runs (autovacuum is on in most
    // servers but this machine's).
    sqlx::query("ALTER TABLE step_attempts SET (autovacuum_enabled = false)").execute(&pool).await.unwrap();
    // 2,000 attempts the statistics have not seen, once the backends publish their counts.
    rara_store::testing::fill_history(&pool, 0, 2_000).await.unwrap();
    published(&pool, 2_000).await;

    // Passes every 100 ms: the next check analyzes step_attempts, within about a second.
    let seen = Instant::now();
    let passes = passes_until_analyzed(&scheduler, STATISTICS_INTERVAL * 3).await;
    assert!(passes.statistics_refreshes >= 1, "step_attempts outgrew its statistics: {passes:?}");
    assert!(seen.elapsed() <= STATISTICS_INTERVAL + Duration::from_millis(500), "{:?}", seen.elapsed());
    assert!(passes.statistics_checks <= 2, "once a second, not every pass: {passes:?}");
    assert_eq!(passes.reaper_runs, 0, "the reaper waits for its own interval");
    assert_eq!(unseen_attempt_changes(&pool).await, 0, "analyzed");

    // Every attempt changed once more (as many changes as rows), none added: the statistics
    // still describe the table's size, and the checks of two seconds analyze nothing.
    sqlx::query("UPDATE step_attempts SET finished_at = finished_at + interval '1 second'")
        .execute(&pool)
        .await
        .unwrap();
    published(&pool, 2_000).await;
    let passes = passes_until_analyzed(&scheduler, STATISTICS_INTERVAL * 2).await;
    assert!(passes.statistics_checks >= 1, "{passes:?}");
    assert_eq!(passes.statistics_refreshes, 0, "changes without growth: {passes:?}");
    assert_eq!(unseen_attempt_changes(&pool).await, 2_000, "not analyzed");

    // 2,000 more: the table doubled, and the next check analyzes it.
    rara_store::testing::fill_history(&pool, 2_000, 4_000).await.unwrap();
    published(&pool, 4_000).await;
    let passes = passes_until_analyzed(&scheduler, STATISTICS_INTERVAL * 3).await;
    assert!(passes.statistics_refreshes >= 1, "step_attempts doubled: {passes:?}");
    assert_eq!(unseen_attempt_changes(&pool).await, 0, "analyzed");
}

/// Scheduler passes every 100 ms until one analyzed a table or `within` passed.
async fn passes_until_analyzed(scheduler: &Scheduler, within: Duration) -> Counters {
    let start = Instant::now();
    let mut passes = Counters::default();
    while passes.statistics_refreshes == 0 && start.elapsed() < within {
        passes += scheduler.pass().await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    passes
}

/// Waits until `step_attempts` shows `changes` changes since its last analyze (the backends
/// publish their counts within about a second).
async fn published(pool: &PgPool, changes: i64) {
    let what = format!("{changes} changes show in pg_stat_user_tables");
    rara_testkit::eventually_within(&what, Duration::from_secs(30), || async {
        let seen = unseen_attempt_changes(pool).await;
        if seen >= changes { Ok(()) } else { Err(seen) }
    })
    .await;
}

/// A scheduler on an in-memory queue, its reaper every `reap_interval_ms`.
fn scheduler(pool: &PgPool, reap_interval_ms: &str) -> Scheduler {
    let vars = [("RARA_QUEUE_URL", "memory://maintenance"), ("RARA_REAP_INTERVAL_MS", reap_interval_ms)];
    let settings =
        Settings::from_lookup("test", |k| vars.iter().find(|(name, _)| *name == k).map(|(_, v)| (*v).to_owned()))
            .unwrap();
    let queue = Arc::new(MemoryQueue::new(Duration::from_secs(30), 10));
    Scheduler::new(Store::new(pool.clone()), queue, Arc::new(settings))
}

/// Changes to `step_attempts` since its last analyze.
async fn unseen_attempt_changes(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT n_mod_since_analyze FROM pg_stat_user_tables WHERE relname = 'step_attempts'")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Whether the console's triggers are on (migration 000016).
async fn console_triggers_enabled(pool: &PgPool) -> bool {
    sqlx::query_scalar("SELECT rara_console_triggers_enabled()").fetch_one(pool).await.unwrap()
}

/// The console's triggers cost every write of `steps` while they are on. A console that ends
/// its registration turns them off itself; one whose container froze lets its registration
/// lapse, and the scheduler's maintenance turns them off at its next check (every
/// `CONSOLE_INTERVAL`, at most the reap interval), never while a registration lasts.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_scheduler_turns_the_console_triggers_off_once_no_console_listens(pool: PgPool) {
    let store = Store::new(pool.clone());
    let scheduler = scheduler(&pool, "200");

    let (lasting, frozen) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    store.register_console_listener(lasting, Duration::from_secs(60)).await.unwrap();
    assert!(console_triggers_enabled(&pool).await);
    scheduler.pass().await.unwrap();
    assert!(console_triggers_enabled(&pool).await, "a registration lasts: the triggers stay on");

    store.unregister_console_listener(lasting).await.unwrap();
    store.register_console_listener(frozen, Duration::from_millis(1)).await.unwrap();
    assert!(console_triggers_enabled(&pool).await);
    // Each look that finds them on runs a pass, which should turn them off.
    let within = Duration::from_secs(5);
    rara_testkit::eventually_within("a scheduler pass turns the console's triggers off", within, || async {
        if !console_triggers_enabled(&pool).await {
            return true;
        }
        scheduler.pass().await.unwrap();
        false
    })
    .await;
}
