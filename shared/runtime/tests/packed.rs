//! Several steps per message (`RARA_STEPS_PER_MESSAGE`, message format 2) on Postgres +
//! LocalStack's SQS: the scheduler packs a round's steps, the executor settles each step of a
//! message, deletes the message once all are settled, and hides it until the soonest instant
//! its unsettled steps asked for when one must come back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use rara_queue::{MessageStep, Queue, StepMessage};
use rara_runtime::batch::Record;
use sqlx::PgPool;
use uuid::Uuid;

const LIMIT: Duration = Duration::from_secs(60);

fn record(m: rara_queue::Received) -> Record {
    Record {
        message_id: m.message_id,
        receipt_handle: m.receipt_handle,
        body: m.body,
        traceparent: None,
        sent_at: None,
    }
}

/// Receives until `n` messages arrived or `limit` passed.
async fn receive(queue: &dyn Queue, n: usize, limit: Duration) -> Vec<rara_queue::Received> {
    let until = Instant::now() + limit;
    let mut got = Vec::new();
    while got.len() < n && Instant::now() < until {
        got.extend(queue.receive(10, Duration::from_secs(1)).await.unwrap());
    }
    got
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_workflow_runs_to_its_end_with_four_steps_per_message(pool: PgPool) {
    let (store, _queues, stack) = Stack::fresh(pool, &[("RARA_STEPS_PER_MESSAGE", "4")]).await;
    let run_id = submit(
        &store,
        &stack.settings,
        "name: packed\nsteps:\n  - {name: a, operation: noop}\n  - {name: b, operation: noop}\n  - {name: c, operation: noop}\n  - {name: d, operation: noop}\n  - {name: e, operation: noop}\n  - {name: f, operation: noop}\n  - {name: nap, operation: sleep, input: {seconds: 0.3}}\n  - name: flaky\n    operation: fail\n    input: {fail_attempts: 1, retryable: true}\n    max_attempts: 2\n    retry: {initial_delay_seconds: 1, max_delay_seconds: 1, multiplier: 1}\n  - {name: last, operation: noop, depends_on: [a, b, c, d, e, f, nap, flaky]}\n",
    )
    .await;

    // One round: eight due steps in two messages of four, each step with its run's context.
    let counters = stack.scheduler().pass().await.unwrap();
    assert_eq!((counters.leased, counters.sent), (8, 8));
    let messages = receive(stack.queue.as_ref(), 2, Duration::from_secs(5)).await;
    assert_eq!(messages.len(), 2, "eight steps in two messages");
    for m in &messages {
        assert!(m.body.starts_with(r#"{"v":2,"steps":[[""#), "{}", m.body);
        let steps = rara_queue::parse_steps(&m.body).unwrap();
        assert_eq!(steps.len(), 4);
        assert!(steps.iter().all(|s| s.traceparent.as_deref().is_some_and(|t| t.starts_with("00-"))));
        // Back on the queue for the runners.
        stack.queue.change_visibility(&m.receipt_handle, Duration::ZERO).await.unwrap();
    }

    let (status, counters) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "succeeded");
    assert_eq!((counters.succeeded, counters.retried), (9, 1));
    // The flaky step's message came back whole after its retry delay; its three other steps,
    // already recorded, were stale to the claim then.
    assert!(counters.stale >= 3, "{counters:?}");
    let run = store.run(run_id).await.unwrap();
    let flaky = run.steps.iter().find(|s| s.name == "flaky").unwrap();
    assert_eq!(flaky.attempts.len(), 2);
    let retry_at = flaky.attempts[0].retry_at.unwrap();
    let late = (flaky.attempts[1].started_at - retry_at).as_seconds_f64();
    assert!((0.0..3.0).contains(&late), "the retry started {late} s after it was due");
    assert!(run.steps.iter().filter(|s| s.name != "flaky").all(|s| s.attempts.len() == 1), "nothing else ran twice");
    assert!(_queues.dead_letters().await.is_empty());
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn each_step_of_a_message_gets_its_fate_and_the_message_comes_back_for_the_held_one(pool: PgPool) {
    let (store, queues, stack) = Stack::fresh(pool, &[("RARA_STEPS_PER_MESSAGE", "2")]).await;
    let run_id = submit(
        &store,
        &stack.settings,
        "name: mixed\nsteps:\n  - {name: a, operation: noop}\n  - {name: b, operation: noop}\n",
    )
    .await;
    assert_eq!(stack.scheduler().pass().await.unwrap().sent, 2);
    let sent = receive(stack.queue.as_ref(), 1, Duration::from_secs(5)).await.remove(0);
    stack.queue.delete(&[sent.receipt_handle]).await.unwrap();
    let steps = rara_queue::parse_steps(&sent.body).unwrap();
    let step_name = |id: Uuid| {
        let store = store.clone();
        async move { store.run(run_id).await.unwrap().steps.into_iter().find(|s| s.id == id).unwrap().name }
    };
    let (a, b) = if step_name(steps[0].message.step_id).await == "a" {
        (steps[0].clone(), steps[1].clone())
    } else {
        (steps[1].clone(), steps[0].clone())
    };

    // b is claimed by another executor for 3 s: held. A step that does not exist beside them.
    let request = rara_store::claim::ClaimRequest { step_id: b.message.step_id, lease_token: b.message.lease_token };
    store.claim("another-executor", &[request], Duration::from_secs(3)).await.unwrap();
    let unknown = StepMessage::new(Uuid::new_v4(), Uuid::new_v4());
    let body = rara_queue::encode_steps(&[a.clone(), b.clone(), MessageStep { message: unknown, traceparent: None }]);
    queues.send_raw(&body).await;
    let message = receive(stack.queue.as_ref(), 1, Duration::from_secs(5)).await.remove(0);
    let message_id = message.message_id.clone();

    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let report = stack.executor.process(vec![record(message)], deadline).await;
    let processed = Instant::now();
    let c = report.counters;
    assert_eq!((c.received, c.succeeded, c.held, c.dead_lettered, c.returned), (1, 1, 1, 1, 1), "{c:?}");
    assert_eq!(report.returned(), vec![message_id.clone()], "b is not settled: the message comes back");
    assert_eq!(report.acknowledged.len(), 2, "a's success and the unknown step's dead letter");
    assert_eq!(step_status(&store, run_id, "a").await, "succeeded");
    // The dead letter names only its own step, in format 1, with its reason.
    let dead = queues.dead_letters().await;
    assert_eq!(dead, vec![(unknown.to_body(), Some("UNKNOWN_STEP".to_owned()))]);

    // Hidden until b's hold ends (about 3 s), not for the queue's 30 s.
    let back = receive(stack.queue.as_ref(), 1, Duration::from_secs(12)).await;
    let waited = processed.elapsed();
    assert_eq!(back.len(), 1, "the message came back");
    assert_eq!(back[0].message_id, message_id);
    assert!(waited >= Duration::from_secs(1) && waited < Duration::from_secs(8), "came back after {waited:?}");
}
