//! Issue 50, the ordinary path's half of the cliff (`quick_plan.rs` holds the quick path's and
//! the claim's): a batch of 1,000 running steps behind a backlog of 20,000 others, with
//! statistics taken while every step was pending (autovacuum off, or not yet run: the planner
//! then believes no step is held by anyone). Every fenced batch write of `fence.rs`'s
//! `{holders}` must read about one row of `steps` per holder of the batch and compare each
//! with about one input row, however many steps are running; as a plain join of the input with
//! `steps`, the success statement read 21,000 rows for 1,000 (the planner walked every running
//! step of the table against the batch). Measured from `EXPLAIN ANALYZE` (rows, not time).
//!
//! The second test is why each write first locks its rows by key: a holder's own heartbeat
//! that committed while its outcome waited for the row must not turn the outcome into a
//! `LeaseLost` (an update that found its row by `ctid` would skip the row's newer version).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use rara_domain::StepError;
use rara_store::{Holder, Store};
use serde_json::{Value, json};
use sqlx::PgPool;
use sqlx::postgres::PgArguments;
use sqlx::query::QueryScalar;
use std::time::Duration;

const BACKLOG: usize = 20_000;
const BATCH: usize = 1_000;

/// The batch statements with a `{holders}` predicate (`sql::catalogue` names).
const FENCED: [&str; 7] = ["succeed", "retry", "fail", "release_running", "park", "attempt_input", "expand"];

/// What a JSON plan did per row: rows of `steps` its scans read (returned and filtered out,
/// times loops) plus the rows any join compared and threw away (`Rows Removed by Join Filter`).
fn work(plan: &Value) -> f64 {
    match plan {
        Value::Object(node) => {
            let number = |key: &str| node.get(key).and_then(Value::as_f64).unwrap_or(0.0);
            let loops = node.get("Actual Loops").and_then(Value::as_f64).unwrap_or(1.0);
            let read = if node.get("Relation Name").and_then(Value::as_str) == Some("steps") {
                number("Actual Rows") + number("Rows Removed by Filter")
            } else {
                0.0
            };
            (read + number("Rows Removed by Join Filter")) * loops + node.values().map(work).sum::<f64>()
        }
        Value::Array(items) => items.iter().map(work).sum(),
        _ => 0.0,
    }
}

/// `sql` bound as its catalogue entry expects, for the holders `held` (the batch columns first).
fn bind<'q>(name: &str, sql: &'q str, held: &'q Held) -> QueryScalar<'q, sqlx::Postgres, Value, PgArguments> {
    let query = sqlx::query_scalar(sql).bind(&held.ids).bind(&held.workers).bind(&held.fences);
    let n = held.ids.len();
    let error = |code: &str| StepError::retryable(code, "a plan test").to_json();
    let errors = vec![error("test"); n];
    match name {
        "succeed" => query.bind(vec![Value::Null; n]).bind("rara_due"),
        "retry" => query.bind(errors).bind(vec![1000_i64; n]).bind(Some(60_000_i64)),
        "fail" => query.bind(errors).bind(error("skipped")),
        "release_running" => query.bind(error("stopping")).bind("rara_due"),
        "park" => query
            .bind(vec!["http://remote"; n])
            .bind(vec![1_i64; n])
            .bind(vec![chrono::Utc::now(); n])
            .bind(1000_i64)
            .bind(60_000_i64),
        "attempt_input" => query.bind(vec![json!({}); n]),
        "expand" => query
            .bind(vec![0_i32; n])
            .bind(Vec::<uuid::Uuid>::new())
            .bind(Vec::<uuid::Uuid>::new())
            .bind(Vec::<i32>::new())
            .bind(Vec::<String>::new())
            .bind(Vec::<Value>::new())
            .bind("rara_due"),
        other => panic!("no binds for {other}"),
    }
}

struct Held {
    ids: Vec<uuid::Uuid>,
    workers: Vec<String>,
    fences: Vec<i64>,
}

fn held(holders: &[Holder]) -> Held {
    Held {
        ids: holders.iter().map(|h| h.step_id).collect(),
        workers: holders.iter().map(|h| h.worker.clone()).collect(),
        fences: holders.iter().map(|h| h.fence).collect(),
    }
}

fn statement(name: &str) -> &'static str {
    rara_store::sql::catalogue().into_iter().find(|s| s.name == name).unwrap_or_else(|| panic!("{name}")).sql
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn fenced_batch_writes_read_a_row_per_holder_behind_a_backlog_with_stale_statistics(pool: PgPool) {
    let store = Store::new(pool.clone());
    for _ in 0..BACKLOG / 5000 {
        store.submit(&flat_plan(5000)).await.unwrap();
    }
    // Statistics of a table whose steps are all pending; then every step is leased and claimed.
    sqlx::query("ANALYZE steps").execute(&pool).await.unwrap();
    let mut running = Vec::new();
    while running.len() < BACKLOG {
        let round = store.lease_due("scheduler", 1000, LEASE).await.unwrap();
        assert!(!round.is_empty(), "only {} of {BACKLOG} running", running.len());
        running.extend(claim_all(&store, "executor", &round).await.into_iter().map(|c| c.holder));
    }
    let batch = held(&running[running.len() - BATCH..]);

    // rara's own sessions (`rara_store::SESSION_SETTINGS`), as the executor runs them.
    let rara =
        rara_store::pool_options().max_connections(1).connect_with((*pool.connect_options()).clone()).await.unwrap();
    let mut failures = Vec::new();
    for name in FENCED {
        let mut tx = rara.begin().await.unwrap();
        let sql = format!("EXPLAIN (ANALYZE, FORMAT JSON) {}", statement(name));
        let plan = bind(name, &sql, &batch).fetch_one(&mut *tx).await.unwrap();
        tx.rollback().await.unwrap();
        let written = plan[0]["Plan"]["Actual Rows"].as_f64().unwrap();
        assert_eq!(written as usize, BATCH, "{name} wrote every holder of the batch:\n{plan}");
        let work = work(&plan);
        println!("{name}: {work} rows of steps read or compared for {BATCH} holders");
        if work > 4.0 * BATCH as f64 {
            failures.push(format!("{name} read or compared {work} rows for {BATCH} holders:\n{plan}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Waits until another session waits for a row lock (the outcome behind the heartbeat).
async fn until_a_session_waits_for_a_lock(pool: &PgPool) {
    for _ in 0..500 {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        if waiting > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the outcome never waited for the heartbeat's row lock");
}

/// Each outcome of the batch path, written while the holder's own heartbeat of the same step
/// holds the row (uncommitted, then committed): the outcome waits, then lands on the row's
/// newest version. An outcome that found its row by `ctid` (the version its snapshot saw)
/// skips the newer version and answers `LeaseLost` to a holder that never lost its lease
/// (Postgres 15 rechecks a TID scan against the new version's `ctid`).
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn an_outcome_behind_its_own_heartbeat_keeps_the_lease(pool: PgPool) {
    let store = Store::new(pool.clone());
    store.submit(&flat_plan(4)).await.unwrap();
    let leased = store.lease_due("scheduler", 10, LEASE).await.unwrap();
    let holders: Vec<Holder> = claim_all(&store, "executor", &leased).await.into_iter().map(|c| c.holder).collect();
    let error = || StepError::retryable("test", "a plan test");
    for (n, holder) in holders.iter().enumerate() {
        let mut heartbeat = pool.begin().await.unwrap();
        let beat = sqlx::query(rara_store::sql::HEARTBEAT.as_str())
            .bind(holder.step_id)
            .bind(&holder.worker)
            .bind(holder.fence)
            .bind(60_000_i64)
            .execute(&mut *heartbeat)
            .await
            .unwrap();
        assert_eq!(beat.rows_affected(), 1);
        let (store, holder) = (store.clone(), holder.clone());
        let outcome = tokio::spawn(async move {
            let items = [holder.clone()];
            match n {
                0 => store.succeed(&[(holder, Value::Null)]).await,
                1 => store.retry(&[(holder, error(), Duration::ZERO)], rara_store::outcome::RetryVia::Postgres).await,
                2 => store.fail(&[(holder, error())]).await,
                _ => store.release_running(&items, &error()).await,
            }
        });
        until_a_session_waits_for_a_lock(&pool).await;
        heartbeat.commit().await.unwrap();
        let results = outcome.await.unwrap().unwrap();
        assert!(results[0].is_ok(), "outcome {n} behind a committed heartbeat: {:?}", results[0]);
    }
}
