//! Run deadlines (docs/src/guide/recover.md "Run deadlines") with the real Python executor: a run
//! with `timeout_seconds: 5` whose remote step sleeps 60 s is cancelled with `RUN_TIMED_OUT`
//! within a heartbeat of its deadline, and the Python side is told to stop, whether the attempt
//! is attached (its holder hears the cancel) or detached (the scheduler tells it, with the
//! remote credential it has).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use rara_store::Store;
use rara_testkit::python::PythonServer;
use sqlx::PgPool;
use uuid::Uuid;

const LIMIT: Duration = Duration::from_secs(60);

const LATE: &str = "name: late\ntimeout_seconds: 5\nsteps:\n  \
    - {name: nap, operation: sleep, version: \"1.0.0\", timeout_seconds: 120, input: {seconds: 60}}\n";

/// Runs `LATE` on the Python executor with `extra` settings; returns the step, how long after
/// the deadline it was cancelled (database clock), and the server (its log).
async fn timed_out(pool: PgPool, extra: &[(&str, &str)]) -> (Uuid, f64, PythonServer) {
    let server = PythonServer::start();
    let store = Store::new(pool.clone());
    let queues = Queues::new(30, 10).await;
    let mut vars = vec![("RARA_REMOTE_EXECUTORS", server.url())];
    vars.extend_from_slice(extra);
    let stack = Stack::new(store.clone(), &queues, settings(&queues, &vars)).await;
    let run_id = submit(&store, &stack.settings, LATE).await;
    let (status, _) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "cancelled");
    let nap = store.run(run_id).await.unwrap().steps.remove(0);
    assert_eq!(nap.error.as_ref().unwrap().code, "RUN_TIMED_OUT", "{nap:?}");
    let late = finished_after_deadline(&pool, nap.id).await;
    (nap.id, late, server)
}

fn told(server: &PythonServer, step_id: Uuid) -> bool {
    server.wait_for_log(&format!("cancel step={step_id} attempt=1 found=True"), Duration::from_secs(5))
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn an_attached_remote_step_of_a_run_past_its_deadline_is_stopped(pool: PgPool) {
    let (step_id, late, server) = timed_out(pool, &[]).await;
    eprintln!("attached: cancelled {late:.2} s after the deadline");
    assert!((0.0..2.0).contains(&late), "cancelled {late} s after the deadline (heartbeat 1 s)");
    assert!(told(&server, step_id), "the Python side was told:\n{}", server.log());
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_detached_remote_step_of_a_run_past_its_deadline_is_told_by_the_scheduler(pool: PgPool) {
    // Parked after a second attached, and not re-attached for a minute: only the scheduler can
    // reach it when the deadline passes.
    let extra = [("RARA_ATTACH_WINDOW_SECONDS", "1"), ("RARA_REATTACH_INTERVAL_SECONDS", "60")];
    let (step_id, late, server) = timed_out(pool.clone(), &extra).await;
    eprintln!("detached: cancelled {late:.2} s after the deadline");
    assert!((0.0..2.0).contains(&late), "cancelled {late} s after the deadline");
    let parked: bool = sqlx::query_scalar("SELECT remote_endpoint IS NOT NULL FROM step_attempts WHERE step_id = $1")
        .bind(step_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(parked, "the attempt ran detached");
    assert!(told(&server, step_id), "the Python side was told:\n{}", server.log());
    assert!(server.log().contains("RUN_TIMED_OUT"), "with the deadline as the reason:\n{}", server.log());
}
