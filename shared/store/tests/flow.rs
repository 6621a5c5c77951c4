//! Flow control (DESIGN.md "Flow control") on real Postgres: limits that hold under three
//! racing schedulers (checked over the attempt history), fair share between a large and a
//! small tenant, priority order, pause and resume with nothing failed, and a rate held within
//! 5 % over 20 s of the lease's clock.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;
use rara_domain::flow::Rate;
use rara_store::Store;
use rara_store::flow::PauseTarget;
use sqlx::PgPool;
use uuid::Uuid;

/// A run of `n` noop steps named `{prefix}{i}`, each with the given step fields.
fn keyed_plan(prefix: &str, n: usize, fields: &str) -> rara_domain::workflow::Plan {
    let steps: String =
        (0..n).map(|i| format!("  - {{name: {prefix}{i}, operation: noop, max_attempts: 1, {fields}}}\n")).collect();
    plan(&format!("name: {prefix}run\nsteps:\n{steps}"))
}

async fn key_of(pool: &PgPool, step_id: Uuid) -> Option<String> {
    sqlx::query_scalar("SELECT concurrency_key FROM steps WHERE id = $1").bind(step_id).fetch_one(pool).await.unwrap()
}

async fn unfinished(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM steps WHERE status NOT IN ('succeeded', 'failed', 'cancelled', 'skipped')")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn three_racing_schedulers_never_hold_more_than_a_limit(pool: PgPool) {
    let store = Store::new(pool.clone());
    // tenant-a: the definition's limit 2. tenant-b and tenant-c: the group tenant-* holds at
    // most 3 of them together. free: no limit.
    store.submit(&keyed_plan("a", 40, "concurrency: {key: tenant-a, limit: 2}")).await.unwrap();
    store.submit(&keyed_plan("b", 40, "concurrency: {key: tenant-b}")).await.unwrap();
    store.submit(&keyed_plan("c", 40, "concurrency: {key: tenant-c}")).await.unwrap();
    store.submit(&keyed_plan("f", 40, "concurrency: {key: free}")).await.unwrap();
    store.set_limit("tenant-*", Some(3), None).await.unwrap();

    let mut schedulers = Vec::new();
    for n in 0..3 {
        let store = store.clone();
        schedulers.push(tokio::spawn(async move {
            let worker = format!("scheduler-{n}");
            let mut idle = 0;
            while idle < 50 {
                let leased = store.lease_due(&worker, 4, LEASE).await.unwrap();
                if leased.is_empty() {
                    idle += 1;
                    tokio::task::yield_now().await;
                    continue;
                }
                idle = 0;
                // Run what was leased: claim it (an attempt starts), yield so the other
                // schedulers lease meanwhile, then succeed.
                let mut holders = Vec::new();
                for l in &leased {
                    holders.push((claim_one(&store, &worker, l).await.holder, serde_json::json!({})));
                }
                tokio::task::yield_now().await;
                for r in store.succeed(&holders).await.unwrap() {
                    r.unwrap();
                }
            }
        }));
    }
    for s in schedulers {
        s.await.unwrap();
    }

    assert_eq!(unfinished(&pool).await, 0, "every step ran");
    let overruns = store.limit_overruns().await.unwrap();
    assert!(overruns.is_empty(), "a key ran over its limit: {overruns:?}");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_small_tenant_is_not_starved_behind_a_large_one(pool: PgPool) {
    let store = Store::new(pool.clone());
    store.submit(&keyed_plan("big", 10_000, "concurrency: {key: tenant-big}")).await.unwrap();
    store.submit(&keyed_plan("small", 10, "concurrency: {key: tenant-small}")).await.unwrap();

    let mut small_per_round = Vec::new();
    for _ in 0..2 {
        let mut small = 0;
        for l in store.lease_due("scheduler", 10, LEASE).await.unwrap() {
            small += usize::from(key_of(&pool, l.step_id).await.as_deref() == Some("tenant-small"));
        }
        small_per_round.push(small);
    }
    assert_eq!(small_per_round, [5, 5], "the two keys take turns: all 10 small steps in the first two rounds");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn higher_priority_is_leased_first_within_a_key_and_across_keys(pool: PgPool) {
    let store = Store::new(pool.clone());
    let run = store
        .submit(&plan(
            "name: p\nsteps:\n\
             - {name: low, operation: noop, concurrency: {key: k}}\n\
             - {name: high, operation: noop, priority: 10, concurrency: {key: k}}\n\
             - {name: mid, operation: noop, priority: 5, concurrency: {key: k}}\n\
             - {name: plain-low, operation: noop, priority: 1}\n\
             - {name: plain-urgent, operation: noop, priority: 100}\n",
        ))
        .await
        .unwrap()
        .run_id;
    let mut order = Vec::new();
    for _ in 0..5 {
        let leased = store.lease_due("scheduler", 1, LEASE).await.unwrap();
        assert_eq!(leased.len(), 1);
        order.push(
            sqlx::query_scalar::<_, String>("SELECT name FROM steps WHERE id = $1")
                .bind(leased[0].step_id)
                .fetch_one(&pool)
                .await
                .unwrap(),
        );
    }
    assert_eq!(order, ["plain-urgent", "high", "mid", "plain-low", "low"], "run {}", run);

    // In one round, each key's first turn comes before any key's second.
    let store2 = Store::new(pool.clone());
    store2.submit(&keyed_plan("x", 3, "priority: 1, concurrency: {key: x}")).await.unwrap();
    store2.submit(&keyed_plan("y", 3, "concurrency: {key: y}")).await.unwrap();
    let mut keys = Vec::new();
    for l in store2.lease_due("scheduler", 4, LEASE).await.unwrap() {
        keys.push(key_of(&pool, l.step_id).await.unwrap());
    }
    keys.sort();
    assert_eq!(keys, ["x", "x", "y", "y"]);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn pause_parks_and_resume_releases_with_nothing_failed(pool: PgPool) {
    let store = Store::new(pool.clone());
    store.submit(&keyed_plan("k", 3, "concurrency: {key: tenant-k}")).await.unwrap();
    let run = store.submit(&keyed_plan("r", 3, "")).await.unwrap().run_id;
    store.submit(&plan("name: o\nsteps:\n- {name: o0, operation: slow.op}\n")).await.unwrap();

    // One step of the key is running when the key is paused: it finishes.
    let first = store.lease_due("scheduler", 1, LEASE).await.unwrap().remove(0);
    let running = claim_one(&store, "executor", &first).await;

    assert!(store.pause(&PauseTarget::Key("tenant-*".into())).await.unwrap());
    assert!(!store.pause(&PauseTarget::Key("tenant-*".into())).await.unwrap(), "paused already");
    assert!(store.pause(&PauseTarget::Run(run)).await.unwrap());
    assert!(store.pause(&PauseTarget::Operation("slow.op".into())).await.unwrap());
    assert!(store.pause(&PauseTarget::Run(Uuid::now_v7())).await.is_err(), "no such run");

    let leased = store.lease_due("scheduler", 100, LEASE).await.unwrap();
    assert!(leased.is_empty(), "everything due is paused: {leased:?}");
    store.succeed(&[(running.holder, serde_json::json!({}))]).await.unwrap().remove(0).unwrap();

    let listed = store.limits().await.unwrap();
    let group = listed.iter().find(|k| k.name == "tenant-*").expect("the paused group is listed");
    assert!(group.paused);
    let key = listed.iter().find(|k| k.name == "tenant-k").expect("the key is listed");
    assert!(key.paused && key.held == 0, "{key:?}");
    assert_eq!(store.pauses().await.unwrap().len(), 3);

    for what in [PauseTarget::Key("tenant-*".into()), PauseTarget::Run(run), PauseTarget::Operation("slow.op".into())] {
        assert!(store.resume(&what).await.unwrap());
    }
    let mut left = Vec::new();
    loop {
        let leased = store.lease_due("scheduler", 100, LEASE).await.unwrap();
        if leased.is_empty() {
            break;
        }
        left.extend(leased);
    }
    assert_eq!(left.len(), 6, "every paused step is leased after resume");
    let failed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM steps WHERE status IN ('failed', 'cancelled', 'skipped')")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(failed, 0, "a pause fails nothing");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_rate_of_50_per_second_holds_within_5_percent_over_20_seconds(pool: PgPool) {
    let store = Store::new(pool.clone());
    let rate: Rate = "50/s".parse().unwrap();
    store.set_limit("api", None, Some(rate)).await.unwrap();
    store.submit(&keyed_plan("a", 1500, "concurrency: {key: api}")).await.unwrap();
    store.submit(&keyed_plan("u", 200, "")).await.unwrap();

    // The lease's clock, in 20 ms rounds over 20 s (no sleeping: the statement takes the time).
    let start: DateTime<Utc> = sqlx::query_scalar("SELECT now() + interval '1 second'").fetch_one(&pool).await.unwrap();
    let mut keyed = HashSet::new();
    let mut unkeyed = 0;
    for round in 0..1000 {
        let at = start + Duration::from_millis(20 * round);
        for l in store.lease_due_at("scheduler", 20, LEASE, Some(at)).await.unwrap() {
            if key_of(&pool, l.step_id).await.is_some() {
                keyed.insert(l.step_id);
            } else {
                unkeyed += 1;
            }
        }
    }
    let per_second = keyed.len() as f64 / 20.0;
    assert!((per_second - 50.0).abs() <= 2.5, "{per_second} leases/s for a rate of 50/s");
    assert_eq!(unkeyed, 200, "steps without a key are not rate limited");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_key_template_is_filled_from_the_run_inputs(pool: PgPool) {
    let store = Store::new(pool.clone());
    let run = store
        .submit(&plan(
            "name: t\ninputs: {tenant: {type: string, default: acme}}\nsteps:\n\
             - {name: s, operation: noop, priority: 3, concurrency: {key: 'tenant-{input.tenant}', limit: 2}}\n",
        ))
        .await
        .unwrap()
        .run_id;
    let (key, limit, priority): (Option<String>, Option<i32>, i32) =
        sqlx::query_as("SELECT concurrency_key, concurrency_limit, priority FROM steps WHERE run_id = $1")
            .bind(run)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((key.as_deref(), limit, priority), (Some("tenant-acme"), Some(2), 3));
}
