//! Test factories: workflow plans with defaults, and helpers that move time for a step
//! (the store takes time from the database, so tests shift timestamps instead of sleeping).
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use rara_domain::config::Config;
use rara_domain::workflow::{Format, Plan, WorkflowDefinition};
use rara_store::claim::{ClaimOutcome, ClaimRequest, ClaimedStep};
use rara_store::lease::Leased;
use rara_store::{Holder, Store};
use sqlx::PgPool;
use uuid::Uuid;

pub const LEASE: Duration = Duration::from_secs(60);

pub fn config() -> Config {
    Config::from_lookup("test", |_| None).expect("default config")
}

/// A plan from YAML, with config defaults.
pub fn plan(yaml: &str) -> Plan {
    WorkflowDefinition::parse(yaml, Format::Yaml).expect("parse").plan(&config()).expect("plan")
}

/// `n` independent noop steps.
pub fn flat_plan(n: usize) -> Plan {
    let steps: String = (0..n).map(|i| format!("  - {{name: s{i}, operation: noop}}\n")).collect();
    plan(&format!("name: flat\nsteps:\n{steps}"))
}

pub async fn step_id(pool: &PgPool, run_id: Uuid, name: &str) -> Uuid {
    sqlx::query_scalar("SELECT id FROM steps WHERE run_id = $1 AND name = $2")
        .bind(run_id)
        .bind(name)
        .fetch_one(pool)
        .await
        .expect("step exists")
}

pub async fn status(pool: &PgPool, step_id: Uuid) -> String {
    sqlx::query_scalar("SELECT status::text FROM steps WHERE id = $1")
        .bind(step_id)
        .fetch_one(pool)
        .await
        .expect("step")
}

pub async fn run_status(pool: &PgPool, run_id: Uuid) -> String {
    sqlx::query_scalar("SELECT status::text FROM workflow_runs WHERE id = $1")
        .bind(run_id)
        .fetch_one(pool)
        .await
        .expect("run")
}

/// Pushes the step's lease expiry into the past, as if its holder had gone silent.
pub async fn expire_lease(pool: &PgPool, step_id: Uuid) {
    sqlx::query("UPDATE steps SET lease_expires_at = now() - interval '1 second' WHERE id = $1")
        .bind(step_id)
        .execute(pool)
        .await
        .expect("expire");
}

/// Makes a step's retry due now, keeping its lease unexpired (the message came back on time).
pub async fn make_due(pool: &PgPool, step_id: Uuid) {
    sqlx::query(
        "UPDATE steps SET next_run_at = now() - interval '1 millisecond',
                          lease_expires_at = greatest(lease_expires_at, now() + interval '1 minute')
         WHERE id = $1",
    )
    .bind(step_id)
    .execute(pool)
    .await
    .expect("make due");
}

pub fn request(leased: &Leased) -> ClaimRequest {
    ClaimRequest { step_id: leased.step_id, lease_token: leased.lease_token }
}

/// Claims one leased step and expects it to be claimed.
pub async fn claim_one(store: &Store, worker: &str, leased: &Leased) -> ClaimedStep {
    claim_all(store, worker, std::slice::from_ref(leased)).await.remove(0)
}

/// Claims leased steps in one batch and expects every one to be claimed.
pub async fn claim_all(store: &Store, worker: &str, leased: &[Leased]) -> Vec<ClaimedStep> {
    let requests: Vec<_> = leased.iter().map(request).collect();
    let outcomes = store.claim(worker, &requests, LEASE).await.expect("claim");
    outcomes
        .into_iter()
        .map(|outcome| match outcome {
            ClaimOutcome::Claimed(step) => *step,
            other => panic!("expected a claim, got {other:?}"),
        })
        .collect()
}

/// Leases the one due step of `run_id` named `name` (and anything else due).
pub async fn lease_named(store: &Store, pool: &PgPool, run_id: Uuid, name: &str) -> Leased {
    let id = step_id(pool, run_id, name).await;
    let leased = store.lease_due("scheduler", 1000, LEASE).await.expect("lease");
    leased.into_iter().find(|l| l.step_id == id).unwrap_or_else(|| panic!("{name} was not due"))
}

pub fn stale_holder(holder: &Holder) -> Holder {
    Holder { fence: holder.fence - 1, ..holder.clone() }
}

/// 200 runs of 100 noop steps, all finished; one attempt per step started every `spacing`
/// seconds back from now (one in ten retried with `E_FLAKY` first, one in fifty failed with
/// `E_DOWN`), and three runs failed within the hour.
pub async fn overview_history(pool: &PgPool, spacing: i64) -> Store {
    let store = Store::new(pool.clone());
    for _ in 0..200 {
        store.submit(&flat_plan(100)).await.unwrap();
    }
    sqlx::query(
        "WITH s AS (SELECT id, row_number() OVER (ORDER BY id) AS i FROM steps)
         INSERT INTO step_attempts (step_id, attempt, fence, leased_by, lease_token, outcome, error, started_at, finished_at)
         SELECT id, 1, -i, 'history', gen_random_uuid(),
                CASE WHEN i % 50 = 0 THEN 'failed' WHEN i % 10 = 0 THEN 'retrying' ELSE 'succeeded' END::rara_attempt_outcome,
                CASE WHEN i % 50 = 0 THEN '{\"code\":\"E_DOWN\",\"message\":\"down\",\"retryable\":false}'::jsonb
                     WHEN i % 10 = 0 THEN '{\"code\":\"E_FLAKY\",\"message\":\"flaky\",\"retryable\":true}'::jsonb END,
                now() - i * make_interval(secs => $1), now() - i * make_interval(secs => $1) + interval '20 ms'
         FROM s ORDER BY i DESC",
    )
    .bind(spacing as f64)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        "UPDATE workflow_runs SET status = (CASE WHEN r.n <= 3 THEN 'failed' ELSE 'succeeded' END)::rara_run_status,
                steps_unfinished = 0, finished_at = now() - CASE WHEN r.n <= 3 THEN interval '5 minutes' ELSE interval '2 days' END
         FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM workflow_runs) r
         WHERE r.id = workflow_runs.id AND r.n <= 190",
    )
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("UPDATE steps SET status = 'succeeded', finished_at = now()").execute(pool).await.unwrap();
    store
}

/// Every scan of `table` in an EXPLAIN (FORMAT JSON) plan, as "<node type> <index>".
pub fn scans_of(plan: &serde_json::Value, table: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![plan];
    while let Some(v) = stack.pop() {
        match v {
            serde_json::Value::Array(items) => stack.extend(items),
            serde_json::Value::Object(node) => {
                let index = node.get("Index Name").and_then(|i| i.as_str());
                let on_steps = node.get("Relation Name").and_then(|r| r.as_str()) == Some(table)
                    || index.is_some_and(|i| i.strip_prefix(table).is_some_and(|rest| rest.starts_with('_')));
                let kind = node.get("Node Type").and_then(|t| t.as_str()).unwrap_or_default();
                if on_steps && kind.contains("Scan") {
                    found.push(format!("{kind} {}", index.unwrap_or("-")));
                }
                stack.extend(node.values());
            }
            _ => {}
        }
    }
    found
}
