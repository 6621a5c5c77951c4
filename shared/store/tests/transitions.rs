//! Every transition of the store on a real Postgres, and every fenced write refusing a
//! stale fence, a wrong holder, a wrong status and an expired-then-taken-over lease.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use rara_domain::StepError;
use rara_domain::executor::Artifact;
use rara_domain::workflow::{Format, WorkflowDefinition};
use rara_store::claim::{ClaimOutcome, ClaimRequest, StaleReason};
use rara_store::outcome::RetryVia;
use rara_store::{Error, Holder, Store};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

fn assert_lease_lost(result: Result<impl std::fmt::Debug, Error>) {
    assert!(matches!(result, Err(Error::LeaseLost { .. })), "expected LeaseLost, got {result:?}");
}

const CHAIN: &str = "name: chain\nsteps:\n  - {name: a, operation: noop}\n  - {name: b, operation: noop, depends_on: [a]}\n  - {name: c, operation: noop, depends_on: [b]}\n";

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn only_steps_whose_dependencies_succeeded_are_due(pool: PgPool) {
    let store = Store::new(pool.clone());
    let run = store.submit(&plan(CHAIN)).await.unwrap();
    let leased = store.lease_due("scheduler", 10, LEASE).await.unwrap();
    assert_eq!(leased.len(), 1, "only the root is due");
    assert_eq!(leased[0].step_id, step_id(&pool, run.run_id, "a").await);
    assert_eq!(status(&pool, leased[0].step_id).await, "leased");
    assert!(store.lease_due("scheduler", 10, LEASE).await.unwrap().is_empty(), "a leased step is not leased again");

    let a = claim_one(&store, "exec-1", &leased[0]).await;
    assert_eq!(a.attempt, 1);
    store.succeed(&[(a.holder.clone(), serde_json::json!({"ok": 1}))]).await.unwrap().remove(0).unwrap();
    assert_eq!(status(&pool, a.holder.step_id).await, "succeeded");

    let b = lease_named(&store, &pool, run.run_id, "b").await;
    let b = claim_one(&store, "exec-1", &b).await;
    store.succeed(&[(b.holder, serde_json::json!({}))]).await.unwrap().remove(0).unwrap();
    assert_eq!(run_status(&pool, run.run_id).await, "running");
    let c = lease_named(&store, &pool, run.run_id, "c").await;
    let c = claim_one(&store, "exec-1", &c).await;
    store.succeed(&[(c.holder, serde_json::json!({}))]).await.unwrap().remove(0).unwrap();
    assert_eq!(run_status(&pool, run.run_id).await, "succeeded");

    let view = store.run(run.run_id).await.unwrap();
    assert!(view.finished_at.is_some());
    assert_eq!(view.steps[2].depends_on, vec!["b".to_string()]);
    assert_eq!(view.steps[0].output, Some(serde_json::json!({"ok": 1})));
    assert_eq!(view.steps[0].attempts.len(), 1);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_step_waits_for_all_of_its_dependencies(pool: PgPool) {
    let store = Store::new(pool.clone());
    let run = store
        .submit(&plan(
            "name: join\nsteps:\n  - {name: a, operation: noop}\n  - {name: b, operation: noop}\n  - {name: j, operation: noop, depends_on: [a, b]}\n",
        ))
        .await
        .unwrap();
    let leased = store.lease_due("scheduler", 10, LEASE).await.unwrap();
    assert_eq!(leased.len(), 2);
    let a = claim_one(&store, "w", &leased[0]).await;
    store.succeed(&[(a.holder, serde_json::json!({}))]).await.unwrap().remove(0).unwrap();
    assert!(store.lease_due("scheduler", 10, LEASE).await.unwrap().is_empty(), "j still waits for the other");
    let b = claim_one(&store, "w", &leased[1]).await;
    store.succeed(&[(b.holder, serde_json::json!({}))]).await.unwrap().remove(0).unwrap();
    let next = store.lease_due("scheduler", 10, LEASE).await.unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].step_id, step_id(&pool, run.run_id, "j").await);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn permanent_failure_skips_dependents_and_fails_the_run(pool: PgPool) {
    let store = Store::new(pool.clone());
    let run = store
        .submit(&plan(
            "name: fan\nsteps:\n  - {name: a, operation: noop}\n  - {name: side, operation: noop}\n  - {name: b, operation: noop, depends_on: [a]}\n  - {name: c, operation: noop, depends_on: [b, side]}\n",
        ))
        .await
        .unwrap();
    let leased = store.lease_due("scheduler", 10, LEASE).await.unwrap();
    let a_id = step_id(&pool, run.run_id, "a").await;
    let a = claim_one(&store, "w", leased.iter().find(|l| l.step_id == a_id).unwrap()).await;
    store.fail(&[(a.holder, StepError::permanent("BOOM", "exploded"))]).await.unwrap().remove(0).unwrap();

    assert_eq!(status(&pool, a_id).await, "failed");
    for name in ["b", "c"] {
        let id = step_id(&pool, run.run_id, name).await;
        assert_eq!(status(&pool, id).await, "skipped", "{name}");
    }
    assert_eq!(run_status(&pool, run.run_id).await, "running", "the independent branch still runs");
    let view = store.run(run.run_id).await.unwrap();
    assert_eq!(view.steps[2].error.as_ref().unwrap().code, "DEPENDENCY_FAILED");
    assert_eq!(view.steps[0].error.as_ref().unwrap().code, "BOOM");
    assert_eq!(view.steps[0].attempts[0].outcome, rara_domain::state::AttemptOutcome::Failed);

    let side_id = step_id(&pool, run.run_id, "side").await;
    let side = claim_one(&store, "w", leased.iter().find(|l| l.step_id == side_id).unwrap()).await;
    store.succeed(&[(side.holder, serde_json::json!({}))]).await.unwrap().remove(0).unwrap();
    assert_eq!(run_status(&pool, run.run_id).await, "failed");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn fenced_writes_refuse_stale_fence_wrong_holder_and_wrong_status(pool: PgPool) {
    let store = Store::new(pool.clone());
    store.submit(&flat_plan(1)).await.unwrap();
    let leased = store.lease_due("scheduler", 1, LEASE).await.unwrap().remove(0);
    let step = claim_one(&store, "exec-1", &leased).await;
    let good = step.holder.clone();
    let stale = stale_holder(&good);
    let stranger = Holder { worker: "exec-2".into(), ..good.clone() };

    for bad in [&stale, &stranger] {
        assert_lease_lost(store.heartbeat(bad, LEASE).await);
        assert_lease_lost(store.progress(bad, 0.5, "half").await);
        assert_lease_lost(store.artifact(bad, &artifact()).await);
        assert_lease_lost(store.succeed(&[(bad.clone(), serde_json::json!({}))]).await.unwrap().remove(0));
        assert_lease_lost(store.fail(&[(bad.clone(), StepError::permanent("X", "x"))]).await.unwrap().remove(0));
        assert_lease_lost(
            store
                .retry(&[(bad.clone(), StepError::retryable("X", "x"), Duration::ZERO)], RetryVia::Postgres)
                .await
                .unwrap()
                .remove(0),
        );
    }
    let view = store.run(step.run_id).await.unwrap();
    assert_eq!(view.steps[0].status, rara_domain::state::StepStatus::Running, "nothing changed");
    assert!(view.steps[0].progress.is_none() && view.steps[0].artifacts.is_empty());

    // The right holder can write; once it finished, even it gets LeaseLost (wrong status).
    store.heartbeat(&good, LEASE).await.unwrap();
    store.progress(&good, 0.5, "half").await.unwrap();
    store.artifact(&good, &artifact()).await.unwrap();
    store.succeed(&[(good.clone(), serde_json::json!({}))]).await.unwrap().remove(0).unwrap();
    assert_lease_lost(store.heartbeat(&good, LEASE).await);
    assert_lease_lost(store.progress(&good, 1.0, "done").await);
    assert_lease_lost(store.succeed(&[(good.clone(), serde_json::json!({}))]).await.unwrap().remove(0));
    let view = store.run(step.run_id).await.unwrap();
    assert_eq!(view.steps[0].artifacts.len(), 1);
    assert_eq!(view.steps[0].progress.as_ref().unwrap().fraction, 0.5);
}

fn artifact() -> Artifact {
    Artifact {
        name: "report".into(),
        uri: "file:///tmp/report.json".into(),
        media_type: Some("application/json".into()),
        size_bytes: Some(42),
        digest: Some("sha256:00".into()),
    }
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn takeover_after_expiry_issues_a_larger_fence_and_rejects_the_old_holder(pool: PgPool) {
    let store = Store::new(pool.clone());
    store.submit(&flat_plan(1)).await.unwrap();
    let leased = store.lease_due("scheduler", 1, LEASE).await.unwrap().remove(0);
    let first = claim_one(&store, "exec-1", &leased).await;

    // While the lease is live, the same message is told to come back when it ends.
    match store.claim("exec-2", &[request(&leased)], LEASE).await.unwrap().remove(0) {
        ClaimOutcome::Held { retry_after } => assert!(retry_after > Duration::from_secs(50), "{retry_after:?}"),
        other => panic!("expected Held, got {other:?}"),
    }

    expire_lease(&pool, leased.step_id).await;
    // An expired holder cannot heartbeat its way back.
    assert_lease_lost(store.heartbeat(&stale_holder(&first.holder), LEASE).await);
    let second = claim_one(&store, "exec-2", &leased).await;
    assert!(second.took_over);
    assert!(second.holder.fence > first.holder.fence, "fences only grow");
    assert_eq!(second.attempt, 2);

    assert_lease_lost(store.heartbeat(&first.holder, LEASE).await);
    assert_lease_lost(
        store.succeed(&[(first.holder.clone(), serde_json::json!({"zombie": true}))]).await.unwrap().remove(0),
    );
    store.succeed(&[(second.holder.clone(), serde_json::json!({"winner": true}))]).await.unwrap().remove(0).unwrap();

    let view = store.run(second.run_id).await.unwrap();
    let step = &view.steps[0];
    assert_eq!(step.output, Some(serde_json::json!({"winner": true})));
    let outcomes: Vec<_> = step.attempts.iter().map(|a| (a.attempt, a.leased_by.as_str(), a.outcome)).collect();
    use rara_domain::state::AttemptOutcome::*;
    assert_eq!(outcomes, vec![(1, "exec-1", LeaseExpired), (2, "exec-2", Succeeded)]);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn stale_tokens_finished_steps_and_batch_duplicates_run_nothing(pool: PgPool) {
    let store = Store::new(pool.clone());
    store.submit(&flat_plan(2)).await.unwrap();
    let leased = store.lease_due("scheduler", 2, LEASE).await.unwrap();
    let wrong_token = ClaimRequest { step_id: leased[1].step_id, lease_token: Uuid::new_v4() };
    let unknown = ClaimRequest { step_id: Uuid::new_v4(), lease_token: Uuid::new_v4() };
    let outcomes =
        store.claim("w", &[request(&leased[0]), request(&leased[0]), wrong_token, unknown], LEASE).await.unwrap();
    assert!(matches!(outcomes[0], ClaimOutcome::Claimed(_)));
    assert_eq!(outcomes[1], ClaimOutcome::Stale(StaleReason::DuplicateInBatch));
    assert_eq!(outcomes[2], ClaimOutcome::Stale(StaleReason::TokenMismatch));
    assert_eq!(outcomes[3], ClaimOutcome::UnknownStep);
    assert_eq!(status(&pool, leased[1].step_id).await, "leased", "a wrong token changes nothing");

    let ClaimOutcome::Claimed(step) = &outcomes[0] else { unreachable!() };
    store.succeed(&[(step.holder.clone(), serde_json::json!({}))]).await.unwrap().remove(0).unwrap();
    let again = store.claim("w", &[request(&leased[0])], LEASE).await.unwrap();
    assert_eq!(again[0], ClaimOutcome::Stale(StaleReason::Finished), "redelivery after success runs nothing");
    let attempts: i64 = sqlx::query_scalar("SELECT count(*) FROM step_attempts WHERE step_id = $1")
        .bind(leased[0].step_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(attempts, 1);
}

/// A batch whose pairs do not all claim: the claimed ones come from the claim, the others
/// from the verdicts read after it, each in its request's place.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn verdicts_keep_their_requests_places_around_the_claims(pool: PgPool) {
    let store = Store::new(pool.clone());
    store.submit(&flat_plan(3)).await.unwrap();
    let leased = store.lease_due("scheduler", 3, LEASE).await.unwrap();
    let held = claim_one(&store, "other", &leased[2]).await;
    let unknown = ClaimRequest { step_id: Uuid::new_v4(), lease_token: Uuid::new_v4() };
    let wrong_token = ClaimRequest { step_id: leased[1].step_id, lease_token: Uuid::new_v4() };
    let outcomes = store
        .claim("w", &[unknown, request(&leased[0]), request(&leased[2]), wrong_token, request(&leased[1])], LEASE)
        .await
        .unwrap();
    assert_eq!(outcomes[0], ClaimOutcome::UnknownStep);
    assert!(matches!(&outcomes[1], ClaimOutcome::Claimed(s) if s.holder.step_id == leased[0].step_id));
    assert!(
        matches!(outcomes[2], ClaimOutcome::Held { retry_after } if retry_after > Duration::from_secs(50)),
        "held by {:?}: {:?}",
        held.holder,
        outcomes[2]
    );
    assert_eq!(outcomes[3], ClaimOutcome::Stale(StaleReason::TokenMismatch));
    assert!(matches!(&outcomes[4], ClaimOutcome::Claimed(s) if s.holder.step_id == leased[1].step_id && !s.took_over));
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn retry_via_message_keeps_the_lease_and_claims_the_next_attempt_when_due(pool: PgPool) {
    let store = Store::new(pool.clone());
    store.submit(&flat_plan(1)).await.unwrap();
    let leased = store.lease_due("scheduler", 1, LEASE).await.unwrap().remove(0);
    let first = claim_one(&store, "w", &leased).await;
    let delay = Duration::from_secs(30);
    store
        .retry(
            &[(first.holder.clone(), StepError::retryable("FLAKY", "try again"), delay)],
            RetryVia::Message { lease: LEASE },
        )
        .await
        .unwrap()
        .remove(0)
        .unwrap();
    assert_eq!(status(&pool, leased.step_id).await, "leased");
    let (next_in, lease_after): (f64, f64) = sqlx::query_as(
        "SELECT extract(epoch FROM next_run_at - now())::float8, extract(epoch FROM lease_expires_at - next_run_at)::float8
         FROM steps WHERE id = $1",
    )
    .bind(leased.step_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!((29.0..=30.0).contains(&next_in), "next_run_at is now + delay: {next_in}");
    assert!((lease_after - 60.0).abs() < 0.01, "the lease ends one lease after the retry is due: {lease_after}");
    assert!(store.lease_due("scheduler", 10, LEASE).await.unwrap().is_empty(), "the scheduler leaves it alone");

    // The message coming back early is told to wait for the rest of the delay.
    match store.claim("w", &[request(&leased)], LEASE).await.unwrap().remove(0) {
        ClaimOutcome::Held { retry_after } => assert!(retry_after > Duration::from_secs(28), "{retry_after:?}"),
        other => panic!("expected Held, got {other:?}"),
    }
    make_due(&pool, leased.step_id).await;
    let second = claim_one(&store, "w", &leased).await;
    assert_eq!(second.attempt, 2);
    assert!(!second.took_over);
    assert!(second.holder.fence > first.holder.fence);
    let view = store.run(second.run_id).await.unwrap();
    assert_eq!(view.steps[0].attempts[0].outcome, rara_domain::state::AttemptOutcome::Retrying);
    assert_eq!(view.steps[0].attempts[0].error.as_ref().unwrap().code, "FLAKY");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn retry_via_postgres_clears_the_lease_and_is_leased_anew_when_due(pool: PgPool) {
    let store = Store::new(pool.clone());
    store.submit(&flat_plan(1)).await.unwrap();
    let leased = store.lease_due("scheduler", 1, LEASE).await.unwrap().remove(0);
    let first = claim_one(&store, "w", &leased).await;
    store
        .retry(
            &[(first.holder, StepError::retryable("SLOW", "later"), Duration::from_secs(13 * 3600))],
            RetryVia::Postgres,
        )
        .await
        .unwrap()
        .remove(0)
        .unwrap();
    assert_eq!(status(&pool, leased.step_id).await, "pending");
    assert!(store.lease_due("scheduler", 10, LEASE).await.unwrap().is_empty(), "not due for 13 hours");
    assert_eq!(
        store.claim("w", &[request(&leased)], LEASE).await.unwrap()[0],
        ClaimOutcome::Stale(StaleReason::TokenMismatch)
    );
    sqlx::query("UPDATE steps SET next_run_at = now() WHERE id = $1")
        .bind(leased.step_id)
        .execute(&pool)
        .await
        .unwrap();
    let again = store.lease_due("scheduler", 10, LEASE).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_ne!(again[0].lease_token, leased.lease_token, "a new lease has a new token");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn retry_is_refused_without_attempts_left(pool: PgPool) {
    let store = Store::new(pool.clone());
    store.submit(&plan("name: r\nsteps:\n  - {name: a, operation: noop, max_attempts: 1}\n")).await.unwrap();
    let leased = store.lease_due("scheduler", 1, LEASE).await.unwrap().remove(0);
    let step = claim_one(&store, "w", &leased).await;
    let result = store
        .retry(&[(step.holder.clone(), StepError::retryable("X", "x"), Duration::ZERO)], RetryVia::Postgres)
        .await
        .unwrap()
        .remove(0);
    assert_lease_lost(result);
    assert_eq!(status(&pool, leased.step_id).await, "running", "the holder must fail it instead");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn reaper_returns_expired_leases_and_fails_exhausted_steps(pool: PgPool) {
    let store = Store::new(pool.clone());
    let run = store
        .submit(&plan(
            "name: reap\nsteps:\n  - {name: lost_message, operation: noop}\n  - {name: dead_holder, operation: noop, max_attempts: 2}\n  - {name: last_try, operation: noop, max_attempts: 1}\n  - {name: after, operation: noop, depends_on: [last_try]}\n",
        ))
        .await
        .unwrap();
    let leased = store.lease_due("scheduler", 10, LEASE).await.unwrap();
    let by_name = |name: &'static str| {
        let pool = pool.clone();
        async move { step_id(&pool, run.run_id, name).await }
    };
    let dead_id = by_name("dead_holder").await;
    let last_id = by_name("last_try").await;
    let lost_id = by_name("lost_message").await;
    let dead = claim_one(&store, "w", leased.iter().find(|l| l.step_id == dead_id).unwrap()).await;
    let last = claim_one(&store, "w", leased.iter().find(|l| l.step_id == last_id).unwrap()).await;
    assert_eq!(store.reap_expired(100).await.unwrap().total(), 0, "live leases are left alone");

    for id in [dead_id, last_id, lost_id] {
        expire_lease(&pool, id).await;
    }
    let reaped = store.reap_expired(100).await.unwrap();
    assert_eq!((reaped.released_leased, reaped.released_running, reaped.failed), (1, 1, 1));
    assert_eq!(status(&pool, lost_id).await, "pending");
    assert_eq!(status(&pool, dead_id).await, "pending");
    assert_eq!(status(&pool, last_id).await, "failed");
    assert_eq!(status(&pool, by_name("after").await).await, "skipped");

    // Late writes of the dead holders and their old messages are all refused.
    assert_lease_lost(store.succeed(&[(dead.holder, serde_json::json!({}))]).await.unwrap().remove(0));
    assert_lease_lost(store.heartbeat(&last.holder, LEASE).await);
    let old = leased.iter().find(|l| l.step_id == lost_id).unwrap();
    assert_eq!(
        store.claim("w", &[request(old)], LEASE).await.unwrap()[0],
        ClaimOutcome::Stale(StaleReason::TokenMismatch)
    );

    let view = store.run(run.run_id).await.unwrap();
    let lost = view.steps.iter().find(|s| s.name == "lost_message").unwrap();
    assert_eq!(lost.attempt, 0, "a lease that never ran used no attempt");
    let dead = view.steps.iter().find(|s| s.name == "dead_holder").unwrap();
    assert_eq!(dead.attempt, 1, "the dead holder's execution counted");
    assert_eq!(dead.attempts[0].outcome, rara_domain::state::AttemptOutcome::LeaseExpired);
    let last = view.steps.iter().find(|s| s.name == "last_try").unwrap();
    assert_eq!(last.error.as_ref().unwrap().code, "LEASE_EXPIRED");
    assert_eq!(store.lease_due("scheduler", 10, LEASE).await.unwrap().len(), 2, "both returned steps are due again");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_late_message_claims_its_never_claimed_step_until_the_reaper_leases_it_again(pool: PgPool) {
    let store = Store::new(pool.clone());
    store.submit(&flat_plan(2)).await.unwrap();
    let leased = store.lease_due("scheduler", 2, LEASE).await.unwrap();
    // A message that waited in a backlog past its delivery timeout still claims: nothing
    // re-leased the step, so no second message exists.
    expire_lease(&pool, leased[0].step_id).await;
    let outcome = store.claim("w", &[request(&leased[0])], LEASE).await.unwrap().remove(0);
    assert!(matches!(outcome, ClaimOutcome::Claimed(_)), "{outcome:?}");
    // Once the reaper has leased it again, the old message is stale.
    expire_lease(&pool, leased[1].step_id).await;
    assert_eq!(store.reap_expired(10).await.unwrap().released_leased, 1);
    let outcome = store.claim("w", &[request(&leased[1])], LEASE).await.unwrap().remove(0);
    assert_eq!(outcome, ClaimOutcome::Stale(StaleReason::TokenMismatch));
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn release_gives_unsent_leases_back(pool: PgPool) {
    let store = Store::new(pool.clone());
    store.submit(&flat_plan(2)).await.unwrap();
    let leased = store.lease_due("scheduler", 2, LEASE).await.unwrap();
    let released =
        store.release(&[(leased[0].step_id, leased[0].lease_token), (leased[1].step_id, Uuid::new_v4())]).await;
    assert_eq!(released.unwrap(), 1, "a lease that changed is left alone");
    assert_eq!(status(&pool, leased[0].step_id).await, "pending");
    assert_eq!(status(&pool, leased[1].step_id).await, "leased");
    assert_eq!(store.lease_due("scheduler", 2, LEASE).await.unwrap().len(), 1);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn cancelling_a_running_step_stops_its_holder_and_skips_dependents(pool: PgPool) {
    let store = Store::new(pool.clone());
    let run = store.submit(&plan(CHAIN)).await.unwrap();
    let a = lease_named(&store, &pool, run.run_id, "a").await;
    let a = claim_one(&store, "w", &a).await;
    assert!(store.cancel_step(a.holder.step_id, "operator asked").await.unwrap());
    assert_lease_lost(store.heartbeat(&a.holder, LEASE).await);
    assert_lease_lost(store.succeed(&[(a.holder.clone(), serde_json::json!({}))]).await.unwrap().remove(0));
    assert_eq!(status(&pool, a.holder.step_id).await, "cancelled");
    assert_eq!(status(&pool, step_id(&pool, run.run_id, "c").await).await, "skipped");
    assert_eq!(run_status(&pool, run.run_id).await, "cancelled");
    assert!(!store.cancel_step(a.holder.step_id, "again").await.unwrap(), "a finished step stays as it is");
    assert!(matches!(store.cancel_step(Uuid::new_v4(), "x").await, Err(Error::StepNotFound(_))));
    let view = store.run(run.run_id).await.unwrap();
    assert_eq!(view.steps[0].attempts[0].outcome, rara_domain::state::AttemptOutcome::Cancelled);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn cancelling_a_run_cancels_every_unfinished_step(pool: PgPool) {
    let store = Store::new(pool.clone());
    let run = store.submit(&plan(CHAIN)).await.unwrap();
    let a = lease_named(&store, &pool, run.run_id, "a").await;
    assert_eq!(store.cancel_run(run.run_id, "not needed").await.unwrap(), 3);
    assert_eq!(run_status(&pool, run.run_id).await, "cancelled");
    assert_eq!(store.claim("w", &[request(&a)], LEASE).await.unwrap()[0], ClaimOutcome::Stale(StaleReason::Finished));
    assert!(store.lease_due("scheduler", 10, LEASE).await.unwrap().is_empty());
    assert_eq!(store.cancel_run(run.run_id, "again").await.unwrap(), 0);
    assert!(matches!(store.cancel_run(Uuid::new_v4(), "x").await, Err(Error::RunNotFound(_))));
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_same_idempotency_key_returns_the_existing_run(pool: PgPool) {
    let store = Store::new(pool.clone());
    let p = plan("name: once\nidempotency_key: nightly-1\nsteps:\n  - {name: a, operation: noop}\n");
    let first = store.submit(&p).await.unwrap();
    let second = store.submit(&p).await.unwrap();
    assert!(first.created && !second.created);
    assert_eq!(first.run_id, second.run_id);
    let steps: i64 = sqlx::query_scalar("SELECT count(*) FROM steps").fetch_one(&pool).await.unwrap();
    assert_eq!(steps, 1);
    assert!(matches!(store.run(Uuid::new_v4()).await, Err(Error::RunNotFound(_))));
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_same_idempotency_key_with_other_inputs_is_a_conflict_and_stores_nothing(pool: PgPool) {
    let store = Store::new(pool.clone());
    let yaml = "name: once\nidempotency_key: nightly-2\ninputs: {date: {type: string}, limit: {type: integer, default: 10}}\nsteps:\n  - {name: a, operation: noop}\n";
    let definition = WorkflowDefinition::parse(yaml, Format::Yaml).unwrap();
    let with =
        |given: serde_json::Value| definition.plan_for(&config(), given.as_object().unwrap(), |_, _| false).unwrap();
    let first = store.submit(&with(json!({"date": "2026-12-04"}))).await.unwrap();
    // The same inputs, one given as its default (and spelled 10.0): the same run.
    let again = store.submit(&with(json!({"limit": 10.0, "date": "2026-12-04"}))).await.unwrap();
    assert!(first.created && !again.created);
    assert_eq!(first.run_id, again.run_id);
    match store.submit(&with(json!({"date": "2026-12-05"}))).await {
        Err(Error::IdempotencyConflict { key, run_id }) => {
            assert_eq!((key.as_str(), run_id), ("nightly-2", first.run_id));
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM workflow_runs").fetch_one(&pool).await.unwrap();
    let steps: i64 = sqlx::query_scalar("SELECT count(*) FROM steps").fetch_one(&pool).await.unwrap();
    assert_eq!((runs, steps), (1, 1));
    let stored: serde_json::Value =
        sqlx::query_scalar("SELECT inputs FROM workflow_runs").fetch_one(&pool).await.unwrap();
    assert_eq!(stored, json!({"date": "2026-12-04", "limit": 10}));
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn batch_outcomes_report_each_item(pool: PgPool) {
    let store = Store::new(pool.clone());
    store.submit(&flat_plan(3)).await.unwrap();
    let leased = store.lease_due("scheduler", 3, LEASE).await.unwrap();
    let claimed = claim_all(&store, "w", &leased).await;
    let items = vec![
        (claimed[0].holder.clone(), serde_json::json!({"i": 0})),
        (stale_holder(&claimed[1].holder), serde_json::json!({"i": 1})),
        (claimed[2].holder.clone(), serde_json::json!({"i": 2})),
    ];
    let results = store.succeed(&items).await.unwrap();
    assert!(results[0].is_ok() && results[2].is_ok());
    assert_lease_lost(results.into_iter().nth(1).unwrap());
    let finished: i32 =
        sqlx::query_scalar("SELECT steps_total - steps_unfinished FROM workflow_runs").fetch_one(&pool).await.unwrap();
    assert_eq!(finished, 2);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn retrying_a_failed_step_revives_it_and_its_skipped_dependents(pool: PgPool) {
    let store = Store::new(pool.clone());
    let run = store
        .submit(&plan("name: again\nsteps:\n  - {name: a, operation: noop, max_attempts: 1}\n  - {name: b, operation: noop, depends_on: [a]}\n  - {name: c, operation: noop, depends_on: [b]}\n"))
        .await
        .unwrap();
    let a = lease_named(&store, &pool, run.run_id, "a").await;
    let a = claim_one(&store, "w", &a).await;
    store.fail(&[(a.holder.clone(), StepError::permanent("BOOM", "x"))]).await.unwrap().remove(0).unwrap();
    assert_eq!(run_status(&pool, run.run_id).await, "failed");

    assert_eq!(store.retry_step(a.holder.step_id).await.unwrap(), 3);
    assert_eq!(run_status(&pool, run.run_id).await, "running");
    for name in ["a", "b", "c"] {
        assert_eq!(status(&pool, step_id(&pool, run.run_id, name).await).await, "pending", "{name}");
    }
    let again = lease_named(&store, &pool, run.run_id, "a").await;
    let again = claim_one(&store, "w", &again).await;
    assert_eq!((again.attempt, again.max_attempts), (2, 2), "a new budget, the history kept");
    store.succeed(&[(again.holder, serde_json::json!({}))]).await.unwrap().remove(0).unwrap();
    for name in ["b", "c"] {
        let s = lease_named(&store, &pool, run.run_id, name).await;
        let s = claim_one(&store, "w", &s).await;
        store.succeed(&[(s.holder, serde_json::json!({}))]).await.unwrap().remove(0).unwrap();
    }
    assert_eq!(run_status(&pool, run.run_id).await, "succeeded");
    assert_eq!(
        store.retry_step(step_id(&pool, run.run_id, "a").await).await.unwrap(),
        0,
        "a succeeded step is left alone"
    );
    assert!(matches!(store.retry_step(Uuid::new_v4()).await, Err(Error::StepNotFound(_))));
    let listed = store.list_runs(Some(rara_domain::state::RunStatus::Succeeded), 10).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].steps_total, listed[0].steps_finished), (3, 3));
}

/// The next notification on the due channel, or `None` within `wait`.
async fn due_notification(listener: &mut rara_store::DueListener, wait: Duration) -> Option<()> {
    tokio::time::timeout(wait, listener.recv()).await.ok().map(|n| n.unwrap())
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn steps_that_become_due_notify_listening_schedulers(pool: PgPool) {
    let store = Store::new(pool.clone());
    let mut listener = store.listen_due().await.unwrap();
    let quiet = Duration::from_millis(300);

    let run = store.submit(&plan(CHAIN)).await.unwrap();
    assert!(due_notification(&mut listener, Duration::from_secs(5)).await.is_some(), "a submission notifies");

    // Leasing and claiming make nothing due: silence.
    let a = store.lease_due("scheduler", 10, LEASE).await.unwrap().remove(0);
    let a = claim_one(&store, "exec-1", &a).await;
    assert!(due_notification(&mut listener, quiet).await.is_none(), "lease and claim do not notify");

    // a's success makes b due.
    store.succeed(&[(a.holder, serde_json::json!({}))]).await.unwrap().remove(0).unwrap();
    assert!(due_notification(&mut listener, Duration::from_secs(5)).await.is_some(), "a released dependent notifies");

    // b failing makes nothing due (c is skipped): silence.
    let b = lease_named(&store, &pool, run.run_id, "b").await;
    let b = claim_one(&store, "exec-1", &b).await;
    store.fail(&[(b.holder, StepError::permanent("BOOM", "b failed"))]).await.unwrap().remove(0).unwrap();
    assert!(due_notification(&mut listener, quiet).await.is_none(), "a failure makes nothing due");

    // Retrying b by hand makes it due again.
    let b_id = step_id(&pool, run.run_id, "b").await;
    assert_eq!(store.retry_step(b_id).await.unwrap(), 2, "b and its skipped dependent c come back");
    assert!(due_notification(&mut listener, Duration::from_secs(5)).await.is_some(), "a retry by hand notifies");
    listener.close().await;
}

/// The next step id on the cancel channel, or `None` within `wait`.
async fn cancel_notification(listener: &mut rara_store::listen::IdListener, wait: Duration) -> Option<Uuid> {
    tokio::time::timeout(wait, listener.recv()).await.ok().map(|n| n.unwrap())
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn cancelling_a_held_step_notifies_its_holder_and_nothing_else_does(pool: PgPool) {
    let store = Store::new(pool.clone());
    let mut listener = store.listen_cancels().await.unwrap();
    let quiet = Duration::from_millis(300);

    // Lease, claim, progress, heartbeat and success: silence.
    let run = store.submit(&plan(CHAIN)).await.unwrap();
    let a = lease_named(&store, &pool, run.run_id, "a").await;
    let a = claim_one(&store, "w", &a).await;
    store.progress(&a.holder, 0.5, "half").await.unwrap();
    store.heartbeat(&a.holder, LEASE).await.unwrap();
    store.succeed(&[(a.holder, json!({}))]).await.unwrap().remove(0).unwrap();
    assert_eq!(cancel_notification(&mut listener, quiet).await, None, "only a cancel notifies");

    // b running, cancelled by an operator: its id, at commit.
    let b = lease_named(&store, &pool, run.run_id, "b").await;
    let b = claim_one(&store, "w", &b).await;
    assert!(store.cancel_step(b.holder.step_id, "operator asked").await.unwrap());
    assert_eq!(cancel_notification(&mut listener, Duration::from_secs(5)).await, Some(b.holder.step_id));

    // A run cancelled: its leased step is named; its pending one has no holder to tell.
    let run = store.submit(&plan(CHAIN)).await.unwrap();
    let leased = lease_named(&store, &pool, run.run_id, "a").await;
    assert_eq!(store.cancel_run(run.run_id, "not needed").await.unwrap(), 3);
    assert_eq!(cancel_notification(&mut listener, Duration::from_secs(5)).await, Some(leased.step_id));
    assert_eq!(cancel_notification(&mut listener, quiet).await, None, "pending steps are not named");
    listener.close().await;
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn dlq_steps_reads_a_page_of_steps_and_leaves_unknown_ids_out(pool: PgPool) {
    let store = Store::new(pool.clone());
    let run = store.submit(&plan(CHAIN)).await.unwrap();
    let a = store.lease_due("scheduler", 10, LEASE).await.unwrap().remove(0);
    let b = step_id(&pool, run.run_id, "b").await;
    assert!(store.cancel_step(b, "an operator cancelled it").await.unwrap());
    let c = step_id(&pool, run.run_id, "c").await;
    let mut steps = store.dlq_steps(&[a.step_id, b, c, Uuid::new_v4()]).await.unwrap();
    steps.sort_by_key(|s| [a.step_id, b, c].iter().position(|id| *id == s.id));
    let seen: Vec<_> = steps.iter().map(|s| (s.id, s.status, s.lease_token, s.finished_at.is_some())).collect();
    use rara_domain::state::StepStatus::{Cancelled, Leased, Skipped};
    assert_eq!(
        seen,
        [(a.step_id, Leased, Some(a.lease_token), false), (b, Cancelled, None, true), (c, Skipped, None, true)],
        "the unknown id is absent"
    );
}

/// A run's step names live in `step_names` (migration 000017): one row per step, through which
/// the reads by run find the steps; a second step of one name in a run is refused under the
/// constraint's old name, `steps_name_unique_in_run`.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_runs_step_names_find_its_steps_and_stay_unique(pool: PgPool) {
    let store = Store::new(pool.clone());
    let run_id = store.submit(&flat_plan(3)).await.unwrap().run_id;
    let other = store.submit(&flat_plan(2)).await.unwrap().run_id;
    let names: Vec<(String, Uuid)> =
        sqlx::query_as("SELECT name, step_id FROM step_names WHERE run_id = $1 ORDER BY name")
            .bind(run_id)
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(names.iter().map(|n| n.0.as_str()).collect::<Vec<_>>(), ["s0", "s1", "s2"]);
    for (name, id) in &names {
        assert_eq!(step_id(&pool, run_id, name).await, *id, "{name}");
    }
    let view = store.run(run_id).await.unwrap();
    let mut read: Vec<Uuid> = view.steps.iter().map(|s| s.id).collect();
    read.sort_unstable();
    let mut expected: Vec<Uuid> = names.iter().map(|n| n.1).collect();
    expected.sort_unstable();
    assert_eq!(read, expected, "the run's steps, and only them (not the other run's)");
    assert_eq!(store.run(other).await.unwrap().steps.len(), 2);

    let err = sqlx::query("INSERT INTO step_names (run_id, name, step_id) VALUES ($1, 's1', $2)")
        .bind(run_id)
        .bind(Uuid::new_v4())
        .execute(&pool)
        .await
        .unwrap_err();
    let db = err.as_database_error().expect("a database error");
    assert_eq!(db.code().as_deref(), Some("23505"), "{db}");
    assert_eq!(db.constraint(), Some("steps_name_unique_in_run"), "{db}");
}

/// What each transition's commit waits for: the lease returns without the WAL flush (a lease
/// lost in a crash leaves its message stale and its step due again), the claim and the ordinary
/// outcome wait for it (an execution with effects outside starts only after a durable claim,
/// whose flush covers all WAL before it, the lease's included). Read in the writing
/// transaction itself, by a trigger.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_lease_commits_without_the_flush_and_the_claim_and_outcome_with_it(pool: PgPool) {
    sqlx::raw_sql(
        "CREATE TABLE commit_modes (seq serial, status text, mode text);
         CREATE FUNCTION record_commit_mode() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           INSERT INTO commit_modes (status, mode) VALUES (NEW.status, current_setting('synchronous_commit'));
           RETURN NEW;
         END $$;
         CREATE TRIGGER record_commit_mode AFTER UPDATE ON steps FOR EACH ROW EXECUTE FUNCTION record_commit_mode();",
    )
    .execute(&pool)
    .await
    .unwrap();
    let store = Store::new(pool.clone());
    store.submit(&plan("name: one\nsteps:\n  - {name: a, operation: noop}\n")).await.unwrap();
    let leased = store.lease_due("scheduler", 10, LEASE).await.unwrap();
    assert_eq!(leased.len(), 1);
    let a = claim_one(&store, "exec-1", &leased[0]).await;
    store.succeed(&[(a.holder.clone(), json!({}))]).await.unwrap().remove(0).unwrap();

    let modes: Vec<(String, String)> =
        sqlx::query_as("SELECT status, mode FROM commit_modes ORDER BY seq").fetch_all(&pool).await.unwrap();
    let server: String = sqlx::query_scalar("SHOW synchronous_commit").fetch_one(&pool).await.unwrap();
    assert_eq!(server, "on", "the test server flushes at every commit");
    assert_eq!(
        modes,
        [("leased", "off"), ("running", "on"), ("succeeded", "on")].map(|(s, m)| (s.to_owned(), m.to_owned())),
        "each write of the step, in order, with the commit mode of its transaction"
    );
}

/// The submission commits without the flush, so its run is visible and its steps due at once,
/// and answers only after a flush past its commit: a run a caller is told of is durable. Read at
/// the submission's commit by a deferred trigger (the commit mode, and the WAL's insert position
/// just before the commit record); the flush position is read after the answer.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_submission_is_visible_before_its_flush_and_answered_after_it(pool: PgPool) {
    sqlx::raw_sql(
        "CREATE TABLE submit_commits (mode text, at pg_lsn);
         CREATE FUNCTION record_submit_commit() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           INSERT INTO submit_commits VALUES (current_setting('synchronous_commit'), pg_current_wal_insert_lsn());
           RETURN NULL;
         END $$;
         CREATE CONSTRAINT TRIGGER record_submit_commit AFTER INSERT ON workflow_runs
           DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION record_submit_commit();",
    )
    .execute(&pool)
    .await
    .unwrap();
    let store = Store::new(pool.clone());
    let keyed = "name: one\nidempotency_key: k1\nsteps:\n  - {name: a, operation: noop}\n";
    let first = store.submit(&plan(keyed)).await.unwrap();
    let (mode, flushed): (String, bool) =
        sqlx::query_as("SELECT mode, pg_current_wal_flush_lsn() > at FROM submit_commits")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(mode, "off", "the submission's own commit does not wait for the flush");
    assert!(flushed, "the answer comes after the WAL past the submission's commit is flushed");
    assert_eq!(store.lease_due("scheduler", 10, LEASE).await.unwrap().len(), 1, "its step is due");

    let again = store.submit(&plan(keyed)).await.unwrap();
    assert_eq!((again.run_id, again.created), (first.run_id, false), "the same key answers with the same run");
    let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM submit_commits").fetch_one(&pool).await.unwrap();
    assert_eq!(runs, 1, "the repeat stored nothing");
}
