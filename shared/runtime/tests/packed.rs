//! Several steps per message (`RARA_STEPS_PER_MESSAGE`, message format 2) on Postgres +
//! LocalStack's SQS: the scheduler packs a round's steps, the executor settles each step of a
//! message, moves a step that must come back into a message of its own (sent with the delay),
//! and deletes the message once all are settled.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use rara_queue::{MessageStep, Queue, StepMessage};
use rara_runtime::executor::Record;
use sqlx::PgPool;
use uuid::Uuid;

const LIMIT: Duration = Duration::from_secs(60);

/// A received message as a record, without its message's `traceparent` (each packed step
/// carries its own).
fn record(m: rara_queue::Received) -> Record {
    Record { traceparent: None, ..Record::from(m) }
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
    let (store, queues, stack) = Stack::fresh(pool, &[("RARA_STEPS_PER_MESSAGE", "4")]).await;
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
    // The flaky step's retry moved into a message of its own, sent with the retry's delay:
    // its three siblings' message was deleted once they succeeded and never came back.
    assert_eq!((counters.moved, counters.stale, counters.unsettled), (1, 0, 0), "{counters:?}");
    let run = store.run(run_id).await.unwrap();
    let flaky = run.steps.iter().find(|s| s.name == "flaky").unwrap();
    assert_eq!(flaky.attempts.len(), 2);
    let retry_at = flaky.attempts[0].retry_at.unwrap();
    let late = (flaky.attempts[1].started_at - retry_at).as_seconds_f64();
    assert!((0.0..3.0).contains(&late), "the retry started {late} s after it was due");
    assert!(run.steps.iter().filter(|s| s.name != "flaky").all(|s| s.attempts.len() == 1), "nothing else ran twice");
    assert!(queues.dead_letters().await.is_empty());
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn each_step_of_a_message_gets_its_fate_and_the_held_one_moves_into_a_message_of_its_own(pool: PgPool) {
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
    let (message_id, receipt_handle) = (message.message_id.clone(), message.receipt_handle.clone());

    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let report = stack.executor.process(vec![record(message)], deadline).await;
    let processed = Instant::now();
    let c = report.counters;
    assert_eq!((c.received, c.packed, c.succeeded, c.held, c.dead_lettered, c.moved), (1, 2, 1, 1, 1, 1), "{c:?}");
    assert_eq!((c.returned, c.unsettled), (0, 0), "{c:?}");
    assert!(report.returned().is_empty(), "every step settled: the message is deleted");
    assert_eq!(step_status(&store, run_id, "a").await, "succeeded");
    // The dead letter names only its own step, in format 1, with its reason.
    let dead = queues.dead_letters().await;
    assert_eq!(dead, vec![(unknown.to_body(), Some("UNKNOWN_STEP".to_owned()))]);

    stack.queue.delete(&[receipt_handle]).await.unwrap();

    // b alone, in a message of its own (format 1, its run's context), hidden until its hold
    // ends (about 3 s).
    let back = receive(stack.queue.as_ref(), 1, Duration::from_secs(12)).await;
    let waited = processed.elapsed();
    assert_eq!(back.len(), 1, "b's message arrived");
    assert_ne!(back[0].message_id, message_id);
    assert_eq!(back[0].body, b.message.to_body());
    assert_eq!(back[0].traceparent, b.traceparent);
    assert!(waited >= Duration::from_secs(1) && waited < Duration::from_secs(8), "arrived after {waited:?}");
}
