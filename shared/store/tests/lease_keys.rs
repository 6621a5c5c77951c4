//! Author-chosen concurrency keys cannot slow the lease for everyone (DESIGN.md "Flow
//! control"): one round considers a bounded window of keys, the window moves on every round so
//! that every key is leased in time, and `flow_keys` keeps no row for a key nothing needs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashSet;
use std::time::Instant;

use common::*;
use rara_store::Store;
use rara_store::lease::LEASE_KEYS_MIN;
use sqlx::PgPool;

/// One run of `n` noop steps, step i under the key `{prefix}{i:05}`.
async fn submit_keys(store: &Store, prefix: &str, n: usize) {
    let steps: String = (0..n)
        .map(|i| format!("  - {{name: s{i}, operation: noop, concurrency: {{key: \"{prefix}{i:05}\"}}}}\n"))
        .collect();
    store.submit(&plan(&format!("name: {prefix}run\nsteps:\n{steps}"))).await.unwrap();
}

async fn keys_of(pool: &PgPool, leased: &[rara_store::lease::Leased]) -> HashSet<String> {
    let ids: Vec<uuid::Uuid> = leased.iter().map(|l| l.step_id).collect();
    sqlx::query_scalar("SELECT concurrency_key FROM steps WHERE id = ANY($1)")
        .bind(&ids)
        .fetch_all(pool)
        .await
        .unwrap()
        .into_iter()
        .collect()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_round_considers_a_window_of_keys_and_the_next_round_moves_past_keys_without_room(pool: PgPool) {
    let store = Store::new(pool.clone());
    let window = LEASE_KEYS_MIN as usize;
    // A full window of keys that can take nothing (the operator holds their group at 0), and
    // behind them in key order, more keys than a window.
    submit_keys(&store, "blocked-", window).await;
    submit_keys(&store, "free-", window + window / 2).await;
    store.set_limit("blocked-*", Some(0), None).await.unwrap();

    let first = store.lease_due("scheduler", 10, LEASE).await.unwrap();
    assert!(first.is_empty(), "the first window holds only keys without room: {} leased", first.len());
    // The next rounds move on: the free keys are leased, a window at a time at most.
    let mut leased = HashSet::new();
    let mut rounds = 0;
    while leased.len() < window + window / 2 {
        rounds += 1;
        assert!(rounds <= 6, "every free key is leased within a few rounds; {} so far", leased.len());
        let round = store.lease_due("scheduler", 1000, LEASE).await.unwrap();
        let keys = keys_of(&pool, &round).await;
        assert!(keys.len() <= window, "a round takes from at most {window} keys: {}", keys.len());
        assert!(keys.iter().all(|k| k.starts_with("free-")), "a blocked key never leases");
        leased.extend(keys);
    }
    let waiting: i64 =
        sqlx::query_scalar("SELECT count(*) FROM steps WHERE status = 'pending'").fetch_one(&pool).await.unwrap();
    assert_eq!(waiting, window as i64, "the blocked keys wait; none failed");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn with_more_keys_than_a_window_each_round_leases_the_next_window_and_every_key_comes(pool: PgPool) {
    let store = Store::new(pool.clone());
    let window = LEASE_KEYS_MIN as usize;
    submit_keys(&store, "k-", 2 * window + 500).await;
    let mut seen = HashSet::new();
    for (round, expected) in [window, window, 500].into_iter().enumerate() {
        let keys = keys_of(&pool, &store.lease_due("scheduler", LEASE_KEYS_MIN, LEASE).await.unwrap()).await;
        assert_eq!(keys.len(), expected, "round {round} leases one step of each key of its window");
        assert!(keys.is_disjoint(&seen), "round {round} moved past the keys of the rounds before");
        seen.extend(keys);
    }
    assert_eq!(seen.len(), 2 * window + 500, "every key was leased");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_round_whose_batch_fills_first_is_followed_by_the_keys_after_its_last(pool: PgPool) {
    let store = Store::new(pool.clone());
    // Two due steps of each key: a round that ignored where the last one stopped would take
    // the first keys' second steps.
    submit_keys(&store, "k-", 30).await;
    submit_keys(&store, "k-", 30).await;
    // All due at the same instant: neither age nor priority tells the keys apart.
    sqlx::query("UPDATE steps SET next_run_at = now() - interval '1 minute'").execute(&pool).await.unwrap();
    for round in 0..3 {
        let keys = keys_of(&pool, &store.lease_due("scheduler", 10, LEASE).await.unwrap()).await;
        let expected: HashSet<String> = (round * 10..round * 10 + 10).map(|i| format!("k-{i:05}")).collect();
        assert_eq!(keys, expected, "round {round} takes the next ten keys in order");
    }
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn flow_keys_rows_of_keys_with_nothing_due_or_held_and_no_limit_are_pruned(pool: PgPool) {
    let store = Store::new(pool.clone());
    submit_keys(&store, "done-", 30).await;
    let plan_two = plan(
        "name: two\nsteps:\n  - {name: held, operation: noop, concurrency: {key: held}}\n  - {name: limited, operation: noop, concurrency: {key: limited}}\n",
    );
    let two = store.submit(&plan_two).await.unwrap();
    store.set_limit("limited", Some(5), None).await.unwrap();
    let leased = store.lease_due("scheduler", 100, LEASE).await.unwrap();
    assert_eq!(leased.len(), 32);
    let rows = |pool: PgPool| async move {
        sqlx::query_scalar::<_, String>("SELECT name FROM flow_keys ORDER BY name").fetch_all(&pool).await.unwrap()
    };
    assert_eq!(rows(pool.clone()).await.len(), 32, "every key leased has its row");

    // Every step finishes but `held`'s.
    let held = step_id(&pool, two.run_id, "held").await;
    let others: Vec<_> = leased.iter().filter(|l| l.step_id != held).cloned().collect();
    for step in claim_all(&store, "w", &others).await {
        store.succeed(&[(step.holder, serde_json::json!({}))]).await.unwrap().remove(0).unwrap();
    }
    assert_eq!(store.prune_flow_keys(20).await.unwrap(), 20, "a slice at a time");
    assert_eq!(store.prune_flow_keys(20).await.unwrap(), 10);
    assert_eq!(store.prune_flow_keys(20).await.unwrap(), 0);
    assert_eq!(rows(pool.clone()).await, vec!["held".to_owned(), "limited".to_owned()]);
}

/// The lease's time over 10,000 due steps, each under its own key, a round of 1,000 (the default
/// batch), each round rolled back: `cargo test -p rara-store --test lease_keys -- --ignored
/// --nocapture`. `RARA_LEASE_SQL=<file>` times another version of the statement (four
/// parameters: the statement before the window); `RARA_LEASE_KEYLESS=1` submits the 10,000
/// steps without a key (the common case). Journal: `2026-12-06-lease-with-10000-keys.md`.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
#[ignore = "a measurement: run it with --ignored --nocapture"]
async fn lease_time_with_10000_distinct_keys(pool: PgPool) {
    let store = Store::new(pool.clone());
    let keyless = std::env::var("RARA_LEASE_KEYLESS").is_ok_and(|v| v == "1");
    for part in 0..2 {
        if keyless {
            let steps: String = (0..5000).map(|i| format!("  - {{name: s{i}, operation: noop}}\n")).collect();
            store.submit(&plan(&format!("name: run{part}\nsteps:\n{steps}"))).await.unwrap();
        } else {
            submit_keys(&store, &format!("tenant-{part}-"), 5000).await;
        }
    }
    sqlx::query("ANALYZE steps").execute(&pool).await.unwrap();
    let sql = match std::env::var("RARA_LEASE_SQL") {
        Ok(path) => std::fs::read_to_string(path).unwrap(),
        Err(_) => rara_store::sql::LEASE_DUE.to_owned(),
    };
    let windowed = sql.contains("$6");
    let mut times = Vec::new();
    let mut leased = 0;
    for _ in 0..20 {
        let mut tx = pool.begin().await.unwrap();
        sqlx::query("SET LOCAL plan_cache_mode = force_generic_plan").execute(&mut *tx).await.unwrap();
        let mut query = sqlx::query(&sql)
            .bind(1000_i64)
            .bind("scheduler")
            .bind(60_000_i64)
            .bind(None::<chrono::DateTime<chrono::Utc>>);
        if windowed {
            query = query.bind(i64::from(LEASE_KEYS_MIN)).bind(None::<String>);
        }
        let start = Instant::now();
        leased = query.fetch_all(&mut *tx).await.unwrap().len();
        times.push(start.elapsed().as_secs_f64() * 1000.0);
        tx.rollback().await.unwrap();
    }
    times.sort_by(f64::total_cmp);
    println!(
        "lease over 10,000 {} ({}): {leased} rows; median {:.1} ms, min {:.1} ms, max {:.1} ms (20 rounds)",
        if keyless { "steps without a key" } else { "keys" },
        if windowed { "window" } else { "all keys" },
        times[10],
        times[0],
        times[19]
    );
}
