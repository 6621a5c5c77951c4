//! Numbers and names from workflow authors, bounded where the store meets them: a retry
//! delay stored before the bounds at submit cannot fail its batch's siblings; a map's
//! expansion is bounded in its children and in its run's steps in all.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use rara_domain::StepError;
use rara_domain::retry::RetryPolicy;
use rara_domain::workflow::{MAX_MAP_ITEMS, MAX_RUN_STEPS};
use rara_store::Store;
use rara_store::map::Expansion;
use rara_store::outcome::RetryVia;
use sqlx::PgPool;

/// Seconds from now until the step is due.
async fn due_in(pool: &PgPool, step_id: uuid::Uuid) -> f64 {
    sqlx::query_scalar("SELECT extract(epoch FROM next_run_at - now())::float8 FROM steps WHERE id = $1")
        .bind(step_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_retry_with_extreme_stored_numbers_waits_a_day_and_its_siblings_are_recorded(pool: PgPool) {
    let store = Store::new(pool.clone());
    let run = store.submit(&flat_plan(3)).await.unwrap();
    // As a step submitted before the bounds would hold: 1e16 s and a multiplier of 1e300.
    let extreme = step_id(&pool, run.run_id, "s0").await;
    sqlx::query(
        "UPDATE steps SET retry_initial_delay_ms = 9223372036854775807, retry_max_delay_ms = 9223372036854775807,
                          retry_multiplier = 1e300 WHERE id = $1",
    )
    .bind(extreme)
    .execute(&pool)
    .await
    .unwrap();
    let leased = store.lease_due("scheduler", 3, LEASE).await.unwrap();
    let claimed = claim_all(&store, "w", &leased).await;
    // The delay each step's own policy gives, as the executor computes it.
    let items: Vec<_> = claimed
        .iter()
        .map(|c| {
            let policy = RetryPolicy {
                max_attempts: c.max_attempts,
                initial_delay: c.retry_initial_delay,
                max_delay: c.retry_max_delay,
                multiplier: c.retry_multiplier,
                non_retryable_codes: vec![],
            };
            (c.holder.clone(), StepError::retryable("X", "again"), policy.ceiling(2))
        })
        .collect();
    assert!(items.iter().any(|(_, _, d)| *d > Duration::from_secs(1 << 40)), "one delay is extreme");

    for result in store.retry(&items, RetryVia::Postgres).await.expect("the batch is recorded") {
        result.unwrap();
    }
    for c in &claimed {
        let due = due_in(&pool, c.holder.step_id).await;
        if c.holder.step_id == extreme {
            assert!((86_390.0..=86_400.0).contains(&due), "the extreme delay is clamped to a day: {due}");
        } else {
            assert!(due < 60.0, "a sibling retries on its own policy: {due}");
        }
        assert_eq!(status(&pool, c.holder.step_id).await, "pending");
    }
}

/// Two map steps over a literal list, claimed for their expansion; the run id.
async fn two_maps(store: &Store) -> (uuid::Uuid, Vec<rara_store::claim::ClaimedStep>) {
    let run = store
        .submit(&plan(
            "name: maps\nsteps:\n  - {name: wide, operation: noop, for_each: [1]}\n  - {name: small, operation: noop, for_each: [1]}\n  - {name: after, operation: noop, depends_on: [wide]}\n",
        ))
        .await
        .unwrap();
    let leased = store.lease_due("scheduler", 10, LEASE).await.unwrap();
    let mut claimed = claim_all(store, "w", &leased).await;
    claimed.sort_by_key(|c| c.name != "wide");
    (run.run_id, claimed)
}

fn expansion(step: &rara_store::claim::ClaimedStep, n: usize) -> Expansion {
    Expansion { holder: step.holder.clone(), name: step.name.clone(), children: vec![serde_json::json!({}); n] }
}

async fn children(pool: &PgPool, run_id: uuid::Uuid) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM steps WHERE run_id = $1 AND parent_id IS NOT NULL")
        .bind(run_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_map_over_more_children_than_the_bound_fails_with_no_child_and_its_sibling_expands(pool: PgPool) {
    let store = Store::new(pool.clone());
    let (run_id, claimed) = two_maps(&store).await;
    let items = [expansion(&claimed[0], MAX_MAP_ITEMS + 1), expansion(&claimed[1], 3)];
    for result in store.expand(&items).await.unwrap() {
        result.unwrap();
    }
    let wide = &claimed[0];
    assert_eq!(status(&pool, wide.holder.step_id).await, "failed");
    let view = store.run(run_id).await.unwrap();
    let error = view.steps.iter().find(|s| s.name == "wide").unwrap().error.clone().unwrap();
    assert_eq!((error.code.as_str(), error.retryable), ("INVALID_INPUT", false));
    assert_eq!(
        error.message,
        format!("for_each found {} elements; a map runs over at most {MAX_MAP_ITEMS}", MAX_MAP_ITEMS + 1)
    );
    assert_eq!(error.details["children"], MAX_MAP_ITEMS + 1);
    assert_eq!(view.steps.iter().find(|s| s.name == "after").unwrap().status.to_string(), "skipped");
    assert_eq!(children(&pool, run_id).await, 3, "only the sibling's children exist");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn expansions_cannot_take_a_run_past_its_step_bound(pool: PgPool) {
    let store = Store::new(pool.clone());
    let (run_id, claimed) = two_maps(&store).await;
    // As if the run's maps had already made it this large: room for 6 more steps.
    sqlx::query("UPDATE workflow_runs SET steps_total = $2 - 6 WHERE id = $1")
        .bind(run_id)
        .bind(MAX_RUN_STEPS as i32)
        .execute(&pool)
        .await
        .unwrap();
    // The first fits; with it, the second would not.
    let items = [expansion(&claimed[0], 4), expansion(&claimed[1], 4)];
    for result in store.expand(&items).await.unwrap() {
        result.unwrap();
    }
    assert_eq!(status(&pool, claimed[0].holder.step_id).await, "pending", "waits on its children");
    assert_eq!(status(&pool, claimed[1].holder.step_id).await, "failed");
    let view = store.run(run_id).await.unwrap();
    let error = view.steps.iter().find(|s| s.name == "small").unwrap().error.clone().unwrap();
    assert_eq!(
        error.message,
        format!("4 children would take the run to {} steps; a run holds at most {MAX_RUN_STEPS}", MAX_RUN_STEPS + 2)
    );
    assert_eq!(children(&pool, run_id).await, 4);
}
