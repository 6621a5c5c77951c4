//! Quick steps (DESIGN.md "Quick steps") on a real Postgres: which steps the lock takes, what
//! the success writes (the attempt once, the run finished, the dependents released), that a
//! lock held keeps every other worker out, and that a transaction that does not commit leaves
//! the steps to the ordinary claim with nothing written.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use rara_store::Store;
use rara_store::claim::{ClaimOutcome, ClaimRequest, StaleReason};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

const CHAIN: &str =
    "name: chain\nsteps:\n  - {name: a, operation: noop}\n  - {name: b, operation: noop, depends_on: [a]}\n";

/// The quick operations of these tests.
fn noop() -> Vec<String> {
    vec!["noop".to_owned()]
}

async fn attempts(pool: &PgPool, step_id: Uuid) -> Vec<(i32, i64, String, String, bool)> {
    sqlx::query_as(
        "SELECT attempt, fence, leased_by, outcome::text, finished_at >= started_at
         FROM step_attempts WHERE step_id = $1 ORDER BY attempt",
    )
    .bind(step_id)
    .fetch_all(pool)
    .await
    .unwrap()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_quick_success_is_one_write_its_attempt_one_row_and_it_releases_its_dependents(pool: PgPool) {
    let store = Store::new(pool.clone());
    let run = store.submit(&plan(CHAIN)).await.unwrap();
    let a = store.lease_due("scheduler", 10, LEASE).await.unwrap().remove(0);

    let batch = store.quick_lock(&[request(&a)], &noop()).await.unwrap();
    assert_eq!(batch.steps.len(), 1);
    let step = batch.steps[0].clone();
    assert_eq!((step.step_id, step.attempt, step.operation.as_str()), (a.step_id, 1, "noop"));
    assert!(attempts(&pool, a.step_id).await.is_empty(), "nothing is written before the success");
    let landed = batch.succeed("exec-q", &[(&step, json!({"ok": true}))]).await.unwrap();
    assert_eq!(landed, vec![a.step_id]);

    assert_eq!(status(&pool, a.step_id).await, "succeeded");
    assert_eq!(attempts(&pool, a.step_id).await, vec![(1, step.fence, "exec-q".into(), "succeeded".into(), true)]);
    let (attempt, fence, token): (i32, i64, Option<Uuid>) =
        sqlx::query_as("SELECT attempt, fence, lease_token FROM steps WHERE id = $1")
            .bind(a.step_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((attempt, fence, token), (1, step.fence, None));
    // The dependent is due, and a redelivered message for the step runs nothing.
    let b = lease_named(&store, &pool, run.run_id, "b").await;
    let again = store.claim("w", &[request(&a)], LEASE).await.unwrap();
    assert_eq!(again[0], ClaimOutcome::Stale(StaleReason::Finished));
    let b_quick = store.quick_lock(&[request(&b)], &noop()).await.unwrap();
    let b_step = b_quick.steps[0].clone();
    b_quick.succeed("exec-q", &[(&b_step, json!({}))]).await.unwrap();
    assert_eq!(run_status(&pool, run.run_id).await, "succeeded");
    assert_eq!(store.run(run.run_id).await.unwrap().steps[0].output, Some(json!({"ok": true})));
}

/// A batch none of whose steps has dependents is recorded by the statement that does not look
/// for them; a batch with one that has them releases them, wherever that step is in the batch.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_batch_with_one_step_that_has_dependents_releases_them(pool: PgPool) {
    let store = Store::new(pool.clone());
    let yaml = "name: mixed\nsteps:\n  - {name: a, operation: noop}\n  - {name: c, operation: noop}\n  \
                - {name: d, operation: noop}\n  - {name: b, operation: noop, depends_on: [a]}\n";
    let run = store.submit(&plan(yaml)).await.unwrap();
    let leased = store.lease_due("scheduler", 10, LEASE).await.unwrap();
    assert_eq!(leased.len(), 3, "a, c and d are due");
    let mut named = Vec::new();
    for name in ["a", "c", "d"] {
        let id = step_id(&pool, run.run_id, name).await;
        named.push(leased.iter().find(|l| l.step_id == id).unwrap().clone());
    }
    let [a, c, d] = <[_; 3]>::try_from(named).unwrap();

    // c alone: no dependents; the run goes on.
    let batch = store.quick_lock(&[request(&c)], &noop()).await.unwrap();
    assert!(batch.leaves, "nothing depends on c");
    let step = batch.steps[0].clone();
    assert_eq!(batch.succeed("exec-q", &[(&step, json!({}))]).await.unwrap(), vec![c.step_id]);
    assert_eq!(status(&pool, c.step_id).await, "succeeded");
    assert_eq!(run_status(&pool, run.run_id).await, "running");

    // d (none) first, then a (b depends on it): b becomes due.
    let batch = store.quick_lock(&[request(&d), request(&a)], &noop()).await.unwrap();
    assert_eq!(batch.steps.len(), 2);
    assert!(!batch.leaves, "b depends on a");
    let steps = batch.steps.clone();
    let items: Vec<_> = steps.iter().map(|s| (s, json!({}))).collect();
    assert_eq!(batch.succeed("exec-q", &items).await.unwrap().len(), 2);
    let b = lease_named(&store, &pool, run.run_id, "b").await;

    // b, the last: its batch has no dependents either, and it ends the run.
    let batch = store.quick_lock(&[request(&b)], &noop()).await.unwrap();
    assert!(batch.leaves, "nothing depends on b");
    let step = batch.steps[0].clone();
    batch.succeed("exec-q", &[(&step, json!({}))]).await.unwrap();
    assert_eq!(run_status(&pool, run.run_id).await, "succeeded");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_lock_takes_only_what_the_claim_would_claim_afresh_for_a_quick_operation(pool: PgPool) {
    let store = Store::new(pool.clone());
    let run = store
        .submit(&plan(
            "name: mixed\nsteps:\n  - {name: q, operation: noop}\n  - {name: slow, operation: sleep}\n  - {name: t, operation: noop}\n  - {name: r, operation: noop}\n",
        ))
        .await
        .unwrap()
        .run_id;
    let leased = store.lease_due("scheduler", 10, LEASE).await.unwrap();
    let [q, slow, t, r] = [
        step_id(&pool, run, "q").await,
        step_id(&pool, run, "slow").await,
        step_id(&pool, run, "t").await,
        step_id(&pool, run, "r").await,
    ];
    let find = |id: Uuid| leased.iter().find(|l| l.step_id == id).unwrap();
    // `r` is claimed the ordinary way first: running, not leased.
    claim_one(&store, "exec-1", find(r)).await;
    let requests = [
        request(find(q)),
        request(find(q)),
        request(find(slow)),
        ClaimRequest { step_id: t, lease_token: Uuid::new_v4() },
        request(find(r)),
        ClaimRequest { step_id: Uuid::new_v4(), lease_token: Uuid::new_v4() },
    ];
    let batch = store.quick_lock(&requests, &noop()).await.unwrap();
    let locked: Vec<Uuid> = batch.steps.iter().map(|s| s.step_id).collect();
    assert_eq!(locked, vec![q], "a quick operation, leased under the message's token, once");
    drop(batch);
    // Dropped: nothing was written, and the ordinary claim takes every pair as before.
    assert!(attempts(&pool, q).await.is_empty());
    let outcomes = store.claim("exec-2", &requests, LEASE).await.unwrap();
    assert!(matches!(outcomes[0], ClaimOutcome::Claimed(_)), "{outcomes:?}");
    assert!(matches!(outcomes[2], ClaimOutcome::Claimed(_)), "{outcomes:?}");
    assert_eq!(outcomes[3], ClaimOutcome::Stale(StaleReason::TokenMismatch));
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_locked_quick_step_is_held_by_its_transaction_alone(pool: PgPool) {
    let store = Store::new(pool.clone());
    store.submit(&flat_plan(1)).await.unwrap();
    let a = store.lease_due("scheduler", 10, LEASE).await.unwrap().remove(0);
    let batch = store.quick_lock(&[request(&a)], &noop()).await.unwrap();
    assert_eq!(batch.steps.len(), 1);

    // A second quick lock skips it; the ordinary claim and a cancel wait for the transaction.
    let second = store.quick_lock(&[request(&a)], &noop()).await.unwrap();
    assert!(second.steps.is_empty(), "a step another transaction holds is skipped");
    drop(second);
    let claim = {
        let store = store.clone();
        let a = request(&a);
        tokio::spawn(async move { store.claim("exec-2", &[a], LEASE).await.unwrap() })
    };
    // Postgres says why the claim has not finished: it waits for a row lock (a claim that did
    // not wait would have finished, and one stuck for another reason would not be waiting so).
    assert!(waits_for_a_lock(&pool, "-- The executor's batch claim").await, "the claim waits for the lock");
    assert!(!claim.is_finished(), "the claim waits for the lock");
    let step = batch.steps[0].clone();
    batch.succeed("exec-q", &[(&step, json!({}))]).await.unwrap();
    let outcome = claim.await.unwrap();
    assert_eq!(outcome[0], ClaimOutcome::Stale(StaleReason::Finished), "after the success, the claim runs nothing");
    assert_eq!(attempts(&pool, a.step_id).await.len(), 1);
}

/// Whether a session of this database comes to wait for a lock while it runs a statement that
/// contains `text` (in its first kilobyte: `track_activity_query_size`), within five seconds.
async fn waits_for_a_lock(pool: &PgPool, text: &str) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        let waiting: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT FROM pg_stat_activity
                            WHERE datname = current_database() AND wait_event_type = 'Lock'
                              AND state = 'active' AND strpos(query, $1) > 0)",
        )
        .bind(text)
        .fetch_one(pool)
        .await
        .unwrap();
        if waiting {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    false
}

/// The quick success statement in a transaction of the test's own: what `synchronous_commit`
/// its commit would use.
async fn commit_mode_after_quick_success(
    connection: &mut sqlx::PgConnection,
    steps: &[&rara_store::lease::Leased],
) -> String {
    let mut tx = sqlx::Connection::begin(&mut *connection).await.unwrap();
    let ids: Vec<Uuid> = steps.iter().map(|s| s.step_id).collect();
    let tokens: Vec<Uuid> = steps.iter().map(|s| s.lease_token).collect();
    let landed: Vec<Uuid> = sqlx::query_scalar(rara_store::sql::QUICK_SUCCEED.as_str())
        .bind(&ids)
        .bind(&tokens)
        .bind(vec![1_i64; ids.len()])
        .bind(vec![json!({}); ids.len()])
        .bind("exec-q")
        .bind(chrono::Utc::now())
        .bind(rara_store::DUE_CHANNEL)
        .fetch_all(&mut *tx)
        .await
        .unwrap();
    assert_eq!(landed.len(), steps.len());
    let mode: String =
        sqlx::query_scalar("SELECT current_setting('synchronous_commit')").fetch_one(&mut *tx).await.unwrap();
    tx.rollback().await.unwrap();
    mode
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_quick_success_commits_without_the_flush_unless_it_ends_a_run(pool: PgPool) {
    let store = Store::new(pool.clone());
    store
        .submit(&plan("name: two\nsteps:\n  - {name: a, operation: noop}\n  - {name: b, operation: noop}\n"))
        .await
        .unwrap();
    let leased = store.lease_due("scheduler", 10, LEASE).await.unwrap();
    assert_eq!(leased.len(), 2);
    let mut connection = pool.acquire().await.unwrap();
    let server: String = sqlx::query_scalar("SHOW synchronous_commit").fetch_one(&mut *connection).await.unwrap();
    assert_eq!(server, "on", "the test server flushes at every commit");

    // One of the two: the run goes on, the commit does not wait for the flush.
    assert_eq!(commit_mode_after_quick_success(&mut connection, &[&leased[0]]).await, "off");
    // The setting was that transaction's alone.
    let after: String = sqlx::query_scalar("SHOW synchronous_commit").fetch_one(&mut *connection).await.unwrap();
    assert_eq!(after, "on");
    // Both: the run ends, and its end is flushed before the commit returns.
    assert_eq!(commit_mode_after_quick_success(&mut connection, &[&leased[0], &leased[1]]).await, "on");
}
