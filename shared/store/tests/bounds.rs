//! Numbers and names from workflow authors, bounded where the store meets them: a retry
//! delay stored before the bounds at submit cannot fail its batch's siblings.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use rara_domain::StepError;
use rara_domain::retry::RetryPolicy;
use rara_store::Store;
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
