//! Under a backlog: messages that wait in the queue longer than an execution's lease are not
//! sent again. 100 one-second steps on one executor runner (10 at a time) take about ten
//! times the 3 s lease to drain; every step still costs one message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use sqlx::PgPool;

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_backlog_ten_times_the_lease_sends_each_step_once(pool: PgPool) {
    let (store, _queues, stack) =
        Stack::fresh(pool, &[("RARA_LEASE_SECONDS", "3"), ("RARA_HEARTBEAT_SECONDS", "1")]).await;
    let steps: String =
        (0..100).map(|i| format!("  - {{name: s{i}, operation: sleep, input: {{seconds: 1}}}}\n")).collect();
    let run_id = submit(&store, &stack.settings, &format!("name: backlog\nsteps:\n{steps}")).await;

    let (status, counters) = stack.run_until_finished(run_id, Duration::from_secs(120)).await;
    assert_eq!(status, "succeeded");
    let per_step = counters.received as f64 / 100.0;
    eprintln!("messages per step under a backlog of ~10 leases: {per_step:.2} ({counters:?})");
    assert_eq!((counters.succeeded, counters.stale), (100, 0), "{counters:?}");
    assert!(per_step <= 1.1, "{per_step} messages per step");
    let reaped: i64 = sqlx::query_scalar("SELECT count(*) FROM step_attempts WHERE outcome = 'lease_expired'")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(reaped, 0, "no waiting step was taken from its message");
}
