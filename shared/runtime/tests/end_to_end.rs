//! End to end on Postgres + LocalStack's SQS, through the local scheduler and executor
//! runners (the same handler code as the Lambdas): DAGs, retries aligned with message
//! visibility, permanent failures, stale and duplicate messages, poison messages, and a
//! crashed executor recovered by the reaper.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use rara_queue::{Outgoing, Queue, StepMessage};
use rara_store::claim::{ClaimOutcome, ClaimRequest};
use sqlx::PgPool;
use uuid::Uuid;

const LIMIT: Duration = Duration::from_secs(60);

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_dag_of_steps_reaches_succeeded(pool: PgPool) {
    let (store, _queues, stack) = Stack::fresh(pool, &[]).await;
    let run_id = submit(
        &store,
        &stack.settings,
        "name: dag\nsteps:\n  - {name: a, operation: noop}\n  - {name: b, operation: sleep, input: {seconds: 0.3}, depends_on: [a]}\n  - {name: c, operation: noop, depends_on: [a]}\n  - {name: d, operation: noop, depends_on: [b, c]}\n",
    )
    .await;
    let (status, counters) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "succeeded");
    assert_eq!(counters.succeeded, 4);
    let run = store.run(run_id).await.unwrap();
    assert!(run.steps.iter().all(|s| s.attempt == 1 && s.attempts.len() == 1));
    let sleep = run.steps.iter().find(|s| s.name == "b").unwrap();
    assert_eq!(sleep.output, Some(serde_json::json!({"slept_seconds": 0.3})));
    // d started only after both b and c had finished.
    let d = run.steps.iter().find(|s| s.name == "d").unwrap();
    for dep in ["b", "c"] {
        let dep = run.steps.iter().find(|s| s.name == dep).unwrap();
        assert!(d.attempts[0].started_at >= dep.finished_at.unwrap());
    }
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn retryable_failures_succeed_on_attempt_3_after_the_configured_delays(pool: PgPool) {
    let (store, _queues, stack) = Stack::fresh(pool, &[]).await;
    let run_id = submit(
        &store,
        &stack.settings,
        "name: flaky\nsteps:\n  - name: f\n    operation: fail\n    input: {fail_attempts: 2, retryable: true}\n    max_attempts: 3\n    retry: {initial_delay_seconds: 1, max_delay_seconds: 2, multiplier: 2}\n",
    )
    .await;
    let (status, counters) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "succeeded");
    assert_eq!((counters.retried, counters.succeeded), (2, 1));

    let step = store.run(run_id).await.unwrap().steps.remove(0);
    assert_eq!(step.attempt, 3);
    assert_eq!(step.output, Some(serde_json::json!({"attempt": 3})));
    let a = &step.attempts;
    assert_eq!(a.len(), 3);
    for (n, ceiling) in [(0, 1.0), (1, 2.0)] {
        let finished = a[n].finished_at.unwrap();
        let retry_at = a[n].retry_at.expect("a retrying attempt records when its successor is due");
        let delay = (retry_at - finished).as_seconds_f64();
        assert!((-0.01..=ceiling + 0.01).contains(&delay), "attempt {}: delay {delay} s within [0, {ceiling}]", n + 1);
        // The next attempt ran only once its retry was due: the message came back on time.
        assert!(a[n + 1].started_at >= retry_at, "attempt {} started before its retry was due", n + 2);
        // ...and not much later: visibility was set to the same delay (rounded up to a second).
        let late = (a[n + 1].started_at - retry_at).as_seconds_f64();
        assert!(late < 3.0, "attempt {} started {late} s after it was due", n + 2);
        assert_eq!(a[n].error.as_ref().unwrap().code, "INJECTED_FAILURE");
    }
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_permanent_failure_fails_the_run_and_stops_its_dependents(pool: PgPool) {
    let (store, _queues, stack) = Stack::fresh(pool, &[]).await;
    let run_id = submit(
        &store,
        &stack.settings,
        "name: doomed\nsteps:\n  - {name: bad, operation: fail, input: {fail_attempts: 5, retryable: false}, max_attempts: 3}\n  - {name: after, operation: noop, depends_on: [bad]}\n  - {name: ghost, operation: no.such.operation}\n",
    )
    .await;
    let (status, counters) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "failed");
    assert_eq!(counters.failed, 2);
    assert_eq!(step_status(&store, run_id, "bad").await, "failed");
    assert_eq!(step_status(&store, run_id, "after").await, "skipped");
    let run = store.run(run_id).await.unwrap();
    let bad = &run.steps[0];
    assert_eq!(bad.attempt, 1, "a permanent failure is not retried");
    let ghost = &run.steps[2];
    assert_eq!(ghost.error.as_ref().unwrap().code, "UNKNOWN_OPERATION");
    assert_eq!(ghost.attempt, 1);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn redelivered_and_stale_messages_run_nothing(pool: PgPool) {
    let (store, queues, stack) = Stack::fresh(pool, &[]).await;
    let run_id = submit(
        &store,
        &stack.settings,
        "name: once\nsteps:\n  - {name: a, operation: noop}\n  - {name: b, operation: noop}\n",
    )
    .await;
    let (status, _) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "succeeded");

    let (a_id, a_token): (Uuid, Uuid) = sqlx::query_as(
        "SELECT s.id, a.lease_token FROM steps s JOIN step_attempts a ON a.step_id = s.id WHERE s.run_id = $1 AND s.name = 'a'",
    )
    .bind(run_id)
    .fetch_one(store.pool())
    .await
    .unwrap();
    let b_id: Uuid = sqlx::query_scalar("SELECT id FROM steps WHERE run_id = $1 AND name = 'b'")
        .bind(run_id)
        .fetch_one(store.pool())
        .await
        .unwrap();
    // The processed message again, twice, and a message with a lease token that was never b's.
    let redelivered = StepMessage::new(a_id, a_token).to_body();
    queues.send_raw(&redelivered).await;
    queues.send_raw(&redelivered).await;
    queues.send_raw(&StepMessage::new(b_id, Uuid::new_v4()).to_body()).await;

    let counters = stack.drain(Duration::from_secs(2)).await;
    assert_eq!(counters.stale, 3);
    assert_eq!(counters.claimed, 0);
    let attempts: i64 =
        sqlx::query_scalar("SELECT count(*) FROM step_attempts a JOIN steps s ON s.id = a.step_id WHERE s.run_id = $1")
            .bind(run_id)
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(attempts, 2, "nothing ran again");
    assert!(queues.dead_letters().await.is_empty(), "stale messages are acknowledged, not dead-lettered");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn poison_messages_end_in_the_dlq_with_their_reason_and_spare_their_batch(pool: PgPool) {
    let (store, queues, stack) = Stack::fresh(pool, &[]).await;
    let run_id = submit(&store, &stack.settings, "name: mixed\nsteps:\n  - {name: a, operation: noop}\n").await;
    // The step's message and the poison go out in one batch.
    assert_eq!(stack.scheduler().pass().await.unwrap().sent, 1);
    queues.send_raw("this is not json").await;
    queues.send_raw(&format!(r#"{{"v":9,"step_id":"{}","lease_token":"{}"}}"#, Uuid::new_v4(), Uuid::new_v4())).await;
    queues.send_raw(&StepMessage::new(Uuid::new_v4(), Uuid::new_v4()).to_body()).await;

    let counters = stack.drain(Duration::from_secs(2)).await;
    assert_eq!(counters.dead_lettered, 3);
    assert_eq!(counters.succeeded, 1);
    assert_eq!(step_status(&store, run_id, "a").await, "succeeded");
    let mut reasons: Vec<String> = queues.dead_letters().await.into_iter().filter_map(|(_, code)| code).collect();
    reasons.sort();
    assert_eq!(reasons, vec!["MALFORMED_MESSAGE", "UNKNOWN_STEP", "UNSUPPORTED_MESSAGE_VERSION"]);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_claimed_step_whose_executor_died_is_recovered_by_the_reaper(pool: PgPool) {
    let (store, queues, stack) = Stack::fresh(pool, &[]).await;
    let run_id =
        submit(&store, &stack.settings, "name: crash\nsteps:\n  - {name: a, operation: noop, max_attempts: 2}\n").await;
    assert_eq!(stack.scheduler().pass().await.unwrap().sent, 1);

    // A doomed executor receives the message, claims the step, and is never heard from again.
    let queue = queues.queue();
    let received = queue.receive(1, Duration::from_secs(2)).await.unwrap().remove(0);
    let message = StepMessage::parse(&received.body).unwrap();
    let request = ClaimRequest { step_id: message.step_id, lease_token: message.lease_token };
    let claim = store.claim("doomed-executor", &[request], Duration::from_secs(1)).await.unwrap().remove(0);
    assert!(matches!(claim, ClaimOutcome::Claimed(_)));
    queue.delete(&[received.receipt_handle]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;

    let (status, counters) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "succeeded");
    assert_eq!(counters.succeeded, 1);
    let step = store.run(run_id).await.unwrap().steps.remove(0);
    assert_eq!(step.attempt, 2);
    use rara_domain::state::AttemptOutcome::*;
    let outcomes: Vec<_> = step.attempts.iter().map(|a| (a.leased_by.as_str(), a.outcome)).collect();
    assert_eq!(outcomes[0], ("doomed-executor", LeaseExpired));
    assert_eq!(outcomes[1].1, Succeeded);
    assert!(step.attempts[1].fence > step.attempts[0].fence);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn entries_that_fail_to_send_have_their_lease_released(pool: PgPool) {
    let (store, queues, stack) = Stack::fresh(pool, &[]).await;
    let run_id = submit(&store, &stack.settings, "name: unsent\nsteps:\n  - {name: a, operation: noop}\n").await;
    // A scheduler whose queue does not exist: every send fails.
    let broken = std::sync::Arc::new(rara_queue::sqs::SqsQueue::new(
        queues.client.clone(),
        format!("{}-missing", queues.url),
        None,
    ));
    let scheduler = rara_runtime::scheduler::Scheduler::new(store.clone(), broken, stack.settings.clone());
    let counters = scheduler.pass().await.unwrap();
    assert_eq!((counters.leased, counters.sent, counters.released), (1, 0, 1));
    assert_eq!(step_status(&store, run_id, "a").await, "pending", "due again at once");
    let failed: Vec<String> =
        rara_queue::sqs::SqsQueue::new(queues.client.clone(), format!("{}-missing", queues.url), None)
            .send(&[Outgoing::new("x", "{}")])
            .await
            .unwrap();
    assert_eq!(failed, vec!["x".to_string()]);
}

/// With a poll interval of a minute, a submitted step is still enqueued at once: the
/// submission's NOTIFY wakes the waiting scheduler. Without listening it waits for the poll.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_waiting_scheduler_wakes_on_notify_instead_of_its_poll(pool: PgPool) {
    let (store, queues, stack) =
        Stack::fresh(pool, &[("RARA_SCHEDULER_POLL_MS", "60000"), ("RARA_REAP_INTERVAL_MS", "60000")]).await;
    let stop = tokio_util::sync::CancellationToken::new();
    let scheduler = stack.scheduler();
    let task = tokio::spawn({
        let stop = stop.clone();
        async move { scheduler.run(None, stop).await }
    });
    // Its first pass finds nothing; it waits (up to a minute) for a notification.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = tokio::time::Instant::now();
    submit(&store, &stack.settings, "name: wake\nsteps:\n  - {name: a, operation: noop}\n").await;
    let received = queues.queue().receive(1, Duration::from_secs(20)).await.unwrap();
    assert_eq!(received.len(), 1, "the step was enqueued long before the minute's poll");
    assert!(started.elapsed() < Duration::from_secs(20));
    stop.cancel();
    let counters = task.await.unwrap().unwrap();
    assert_eq!(counters.sent, 1);
    assert!(counters.wakeups >= 1, "woken by NOTIFY: {counters:?}");
    assert_eq!(counters.reaper_runs, 1, "the reaper ran on the first pass only");

    // A scheduler that does not listen leaves the next step for its poll (4 s here): nothing
    // is sent before the poll, and the step is sent at the poll, so this scheduler is alive
    // and merely deaf (a hung one would send nothing at all and fail the second check).
    let mut settings = (*stack.settings).clone();
    settings.scheduler_listen = false;
    settings.scheduler_poll = Duration::from_secs(4);
    let quiet =
        rara_runtime::scheduler::Scheduler::new(store.clone(), stack.queue.clone(), std::sync::Arc::new(settings));
    let stop = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn({
        let stop = stop.clone();
        async move { quiet.run(None, stop).await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let submitted = tokio::time::Instant::now();
    submit(&store, &stack.settings, "name: no-wake\nsteps:\n  - {name: a, operation: noop}\n").await;
    assert!(queues.queue().receive(1, Duration::from_secs(2)).await.unwrap().is_empty(), "no listener, no wake-up");
    let received = queues.queue().receive(1, Duration::from_secs(10)).await.unwrap();
    assert_eq!(received.len(), 1, "the step is sent at the next poll");
    let waited = submitted.elapsed();
    assert!(waited >= Duration::from_secs(3), "sent after {waited:?}: only the poll (3.5 s after submit) may send it");
    stop.cancel();
    let counters = task.await.unwrap().unwrap();
    assert_eq!((counters.sent, counters.wakeups), (1, 0));
}
