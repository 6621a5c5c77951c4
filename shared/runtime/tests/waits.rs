//! Durable waits end to end (docs/src/guide/waits.md), on Postgres + LocalStack's SQS through
//! the scheduler and the executor: a timer sends no message and runs nothing, and what follows
//! it starts on time even when the scheduler restarts during the wait; an approval's payload
//! reaches the next step through `$output`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;
use rara_platform::runner::run_executor;
use rara_queue::Queue;
use rara_store::waits::{Delivery, Signal};
use serde_json::json;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

const LIMIT: Duration = Duration::from_secs(60);

async fn started_at(pool: &PgPool, run_id: uuid::Uuid, name: &str) -> DateTime<Utc> {
    sqlx::query_scalar(
        "SELECT a.started_at FROM step_attempts a JOIN steps s ON s.id = a.step_id WHERE s.run_id = $1 AND s.name = $2",
    )
    .bind(run_id)
    .bind(name)
    .fetch_one(pool)
    .await
    .unwrap()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_timer_sends_nothing_and_what_follows_starts_on_time_across_a_scheduler_restart(pool: PgPool) {
    let (store, _queues, stack) = Stack::fresh(pool.clone(), &[]).await;
    let yaml = "name: cool\nsteps:\n  - {name: cool_down, wait: {seconds: 10}}\n  - {name: after, operation: noop, depends_on: [cool_down]}\n";
    let run_id = submit(&store, &stack.settings, yaml).await;

    // A first scheduler runs 4 s into the wait and stops; the executor runs throughout.
    let stop = CancellationToken::new();
    let executor = stack.executor.clone();
    let queue: Arc<dyn Queue> = stack.queue.clone();
    let options = stack.runner_options(None);
    let exec_stop = stop.clone();
    let exec = tokio::spawn(async move { run_executor(&executor, queue, &options, exec_stop).await });
    let first = stack.scheduler().run(Some(Duration::from_secs(4)), CancellationToken::new()).await.unwrap();
    assert_eq!(first.waits_started, 1, "{first:?}");
    assert_eq!(step_status(&store, run_id, "cool_down").await, "waiting");

    // A second one takes over; the run finishes.
    let second_stop = CancellationToken::new();
    let scheduler = stack.scheduler();
    let sched = tokio::spawn({
        let stop = second_stop.clone();
        async move { scheduler.run(None, stop).await }
    });
    let started = tokio::time::Instant::now();
    while started.elapsed() < LIMIT && store.run(run_id).await.unwrap().status.as_str() == "running" {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    second_stop.cancel();
    let second = sched.await.unwrap().unwrap();
    stop.cancel();
    let executed = exec.await.unwrap().unwrap();
    assert_eq!(store.run(run_id).await.unwrap().status.as_str(), "succeeded");

    // The noop started 10 to 11 s after the timer began.
    let waited = started_at(&pool, run_id, "after").await - started_at(&pool, run_id, "cool_down").await;
    let waited = waited.as_seconds_f64();
    assert!((10.0..11.0).contains(&waited), "the step after a 10 s timer started {waited} s after it began");
    // One message in all, for the noop: none for the timer, and the executor received one.
    assert_eq!(first.sent + second.sent, 1, "{first:?} {second:?}");
    assert_eq!(executed.received, 1, "{executed:?}");
    let timer = store.run(run_id).await.unwrap().steps.into_iter().find(|s| s.name == "cool_down").unwrap();
    assert_eq!(timer.operation, "wait.timer");
    assert_eq!(timer.attempt, 1);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn an_approval_payload_reaches_the_next_step_through_output(pool: PgPool) {
    let (store, _queues, stack, echo) = Stack::with_echo(pool.clone()).await;
    let yaml = "name: release
steps:
  - {name: evaluate, operation: noop}
  - {name: approve, depends_on: [evaluate], wait: {signal: approve, timeout_seconds: 600}}
  - name: promote
    operation: test.echo
    depends_on: [approve]
    input: {approved_by: {$output: approve, pointer: /approved_by}}
";
    let run_id = submit(&store, &stack.settings, yaml).await;
    let signaller = {
        let store = store.clone();
        tokio::spawn(async move {
            loop {
                let signal = Signal { id: "s1".into(), payload: json!({"approved_by": "ana"}), reject: None };
                match store.signal(run_id, "approve", &signal).await.unwrap() {
                    Delivery::NotWaiting(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                    other => return other,
                }
            }
        })
    };
    let (status, _) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "succeeded");
    assert!(matches!(signaller.await.unwrap(), Delivery::Delivered { .. }));
    assert_eq!(echo.0.lock().unwrap().clone(), vec![json!({"approved_by": "ana"})]);
}
