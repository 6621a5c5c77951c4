//! Long steps on a real Postgres (DESIGN.md "Long steps"): parking is fenced, a claim of the
//! returning message re-attaches with the same attempt and the same fence, the reaper gives a
//! detached attempt back for re-attaching (never fails it, never opens a second attempt), and
//! a retry forgets it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use rara_domain::StepError;
use rara_domain::executor::Resume;
use rara_store::claim::{ClaimOutcome, ClaimedStep};
use rara_store::detach::Park;
use rara_store::outcome::RetryVia;
use rara_store::{Error, Store};
use sqlx::PgPool;
use uuid::Uuid;

const ENDPOINT: &str = "http://127.0.0.1:50051";
const INTERVAL: Duration = Duration::from_secs(30);
const DELIVERY: Duration = Duration::from_secs(600);

fn park_of(step: &ClaimedStep, sequence: u64) -> Park {
    Park {
        holder: step.holder.clone(),
        resume: Resume { endpoint: ENDPOINT.into(), sequence },
        attached_at: step.attached_at,
    }
}

/// (outcome, number of detached spans) of every attempt row of the step, in order.
async fn attempt_rows(pool: &PgPool, step_id: Uuid) -> Vec<(String, i64)> {
    sqlx::query_as(
        "SELECT outcome::text, jsonb_array_length(detached_spans)::bigint FROM step_attempts
         WHERE step_id = $1 ORDER BY attempt",
    )
    .bind(step_id)
    .fetch_all(pool)
    .await
    .unwrap()
}

/// A one-step run on its last attempt, claimed by `exec-1` and parked at event 5.
async fn parked_step(store: &Store, pool: &PgPool) -> (rara_store::lease::Leased, ClaimedStep) {
    store.submit(&plan("name: long\nsteps:\n  - {name: train, operation: py.train, max_attempts: 1}\n")).await.unwrap();
    let leased = store.lease_due("scheduler", 10, LEASE).await.unwrap().remove(0);
    let first = claim_one(store, "exec-1", &leased).await;
    assert_eq!(first.resume, None, "a first claim starts a new attempt");
    store.park(&[park_of(&first, 5)], INTERVAL, DELIVERY).await.unwrap().remove(0).unwrap();
    assert_eq!(status(pool, leased.step_id).await, "leased", "parked: its message comes back to re-attach");
    (leased, first)
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_parked_attempt_is_reattached_with_the_same_attempt_and_fence(pool: PgPool) {
    let store = Store::new(pool.clone());
    let (leased, first) = parked_step(&store, &pool).await;
    assert_eq!(attempt_rows(&pool, leased.step_id).await, vec![("running".into(), 1)], "the attempt goes on");
    assert!(
        matches!(store.claim("exec-2", &[request(&leased)], LEASE).await.unwrap()[0], ClaimOutcome::Held { .. }),
        "not before the re-attach interval"
    );

    make_due(&pool, leased.step_id).await;
    let again = claim_one(&store, "exec-2", &leased).await;
    assert_eq!(again.resume, Some(Resume { endpoint: ENDPOINT.into(), sequence: 5 }));
    assert_eq!((again.attempt, again.holder.fence), (first.attempt, first.holder.fence), "same attempt, same fence");
    assert!(again.started_at < again.attached_at, "the step's timeout counts from the attempt's start");
    assert_eq!(attempt_rows(&pool, leased.step_id).await.len(), 1, "no second attempt");

    // The holder changed: the first one's writes are refused.
    assert!(matches!(store.heartbeat(&first.holder, LEASE).await, Err(Error::LeaseLost { .. })));
    store.succeed(&[(again.holder.clone(), serde_json::json!({"loss": 0.1}))]).await.unwrap().remove(0).unwrap();
    assert_eq!(status(&pool, leased.step_id).await, "succeeded");
    assert_eq!(attempt_rows(&pool, leased.step_id).await, vec![("succeeded".into(), 1)]);
    let span: serde_json::Value =
        sqlx::query_scalar("SELECT detached_spans -> 0 FROM step_attempts WHERE step_id = $1")
            .bind(leased.step_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((span["by"].as_str(), span["sequence"].as_i64()), (Some("exec-1"), Some(5)));
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn parking_is_fenced(pool: PgPool) {
    let store = Store::new(pool.clone());
    store.submit(&plan("name: long\nsteps:\n  - {name: train, operation: py.train}\n")).await.unwrap();
    let leased = store.lease_due("scheduler", 10, LEASE).await.unwrap().remove(0);
    let step = claim_one(&store, "exec-1", &leased).await;
    let stale = ClaimedStep { holder: stale_holder(&step.holder), ..step.clone() };
    let results = store.park(&[park_of(&stale, 3)], INTERVAL, DELIVERY).await.unwrap();
    assert!(matches!(results[0], Err(Error::LeaseLost { .. })));
    assert_eq!(status(&pool, leased.step_id).await, "running", "nothing changed");
    assert!(store.detached_attempts(leased.step_id).await.unwrap().is_empty());
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_reaper_gives_a_detached_attempt_back_for_reattaching_never_failing_it(pool: PgPool) {
    let store = Store::new(pool.clone());
    let (leased, first) = parked_step(&store, &pool).await;

    // Every message of the parked step is lost: the reaper finds its lease expired (the
    // re-attach interval and the delivery timeout after the park).
    sqlx::query("UPDATE steps SET next_run_at = now() - interval '2 s' WHERE id = $1")
        .bind(leased.step_id)
        .execute(&pool)
        .await
        .unwrap();
    expire_lease(&pool, leased.step_id).await;
    let reaped = store.reap_expired(100).await.unwrap();
    assert_eq!((reaped.released_leased, reaped.failed), (1, 0));
    let relet = store.lease_due("scheduler", 10, LEASE).await.unwrap().remove(0);
    let again = claim_one(&store, "exec-2", &relet).await;
    assert_eq!((again.attempt, again.holder.fence), (first.attempt, first.holder.fence));
    assert!(again.resume.is_some(), "re-attached under the new lease token");

    // The re-attached holder dies on the step's last attempt: given back, not failed.
    expire_lease(&pool, leased.step_id).await;
    let reaped = store.reap_expired(100).await.unwrap();
    assert_eq!((reaped.released_running, reaped.failed), (1, 0));
    assert_eq!(status(&pool, leased.step_id).await, "pending");
    assert_eq!(attempt_rows(&pool, leased.step_id).await, vec![("running".into(), 1)], "the attempt stays open");
    let relet = store.lease_due("scheduler", 10, LEASE).await.unwrap().remove(0);
    let third = claim_one(&store, "exec-3", &relet).await;
    assert_eq!((third.attempt, third.holder.fence), (first.attempt, first.holder.fence));
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_retry_forgets_the_detached_attempt_and_the_next_claim_starts_a_new_one(pool: PgPool) {
    let store = Store::new(pool.clone());
    store.submit(&plan("name: long\nsteps:\n  - {name: train, operation: py.train, max_attempts: 3}\n")).await.unwrap();
    let leased = store.lease_due("scheduler", 10, LEASE).await.unwrap().remove(0);
    let first = claim_one(&store, "exec-1", &leased).await;
    store.park(&[park_of(&first, 9)], INTERVAL, DELIVERY).await.unwrap().remove(0).unwrap();
    make_due(&pool, leased.step_id).await;
    let again = claim_one(&store, "exec-2", &leased).await;
    // The executor lost the attempt (it restarted): a retryable failure.
    let lost = StepError::retryable("ATTEMPT_NOT_FOUND", "the remote executor no longer knows the attempt");
    let via = RetryVia::Message { lease: DELIVERY };
    store.retry(&[(again.holder.clone(), lost, Duration::ZERO)], via).await.unwrap().remove(0).unwrap();
    make_due(&pool, leased.step_id).await;
    let next = claim_one(&store, "exec-2", &leased).await;
    assert_eq!(next.resume, None);
    assert_eq!(next.attempt, first.attempt + 1);
    assert!(next.holder.fence > first.holder.fence, "a new attempt, a new fence");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_cancel_finds_the_detached_attempts_it_must_reach(pool: PgPool) {
    let store = Store::new(pool.clone());
    let (leased, first) = parked_step(&store, &pool).await;
    let run_id = leased.run_id;
    let expected = vec![rara_store::detach::DetachedAttempt {
        step_id: leased.step_id,
        attempt: first.attempt,
        fence: first.holder.fence,
        endpoint: ENDPOINT.into(),
    }];
    assert_eq!(store.detached_attempts(run_id).await.unwrap(), expected, "by run");
    assert_eq!(store.detached_attempts(leased.step_id).await.unwrap(), expected, "by step");
    assert!(store.cancel_step(leased.step_id, "no longer needed").await.unwrap());
    assert_eq!(status(&pool, leased.step_id).await, "cancelled");
    assert!(store.detached_attempts(run_id).await.unwrap().is_empty());
}
