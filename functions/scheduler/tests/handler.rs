//! The scheduler Lambda's handler with a `LambdaEvent` built from the committed fixture
//! (`tests/fixtures/scheduled-event.json`), against Postgres and LocalStack's SQS.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use lambda_runtime::{Context, LambdaEvent};
use rara_queue::{Queue, StepMessage};
use rara_runtime::scheduler::Scheduler;
use rara_store::Store;
use rara_testkit::{Queues, repo_root, settings, submit};
use sqlx::PgPool;

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_scheduled_event_leases_and_enqueues_every_due_step(pool: PgPool) {
    let store = Store::new(pool);
    let queues = Queues::new(30, 10).await;
    let settings = Arc::new(settings(&queues, &[]));
    let run_id = submit(
        &store,
        &settings,
        "name: three\nsteps:\n  - {name: a, operation: noop}\n  - {name: b, operation: noop}\n  - {name: c, operation: noop, depends_on: [a]}\n",
    )
    .await;
    let scheduler = Scheduler::new(store.clone(), queues.queue(), settings);

    let text = std::fs::read_to_string(repo_root().join("tests/fixtures/scheduled-event.json")).unwrap();
    let payload: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut context = Context::default();
    context.deadline = (std::time::SystemTime::now() + Duration::from_secs(10))
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    // A zero budget: one pass, then answer.
    let counters =
        scheduler::handle(&scheduler, Duration::ZERO, Duration::from_secs(1), LambdaEvent::new(payload, context))
            .await
            .unwrap();
    assert_eq!((counters.leased, counters.sent, counters.released), (2, 2, 0), "c waits for a");

    let mut messages = queues.queue().receive(10, Duration::from_secs(1)).await.unwrap();
    if messages.len() < 2 {
        messages.extend(queues.queue().receive(10, Duration::from_secs(1)).await.unwrap());
    }
    assert_eq!(messages.len(), 2);
    let due: Vec<uuid::Uuid> =
        sqlx::query_scalar("SELECT id FROM steps WHERE run_id = $1 AND status = 'leased' ORDER BY name")
            .bind(run_id)
            .fetch_all(store.pool())
            .await
            .unwrap();
    for m in &messages {
        let message = StepMessage::parse(&m.body).expect("only identifiers travel");
        assert!(due.contains(&message.step_id));
        let traceparent = m.traceparent.as_deref().expect("the trace context travels as an attribute");
        assert!(rara_runtime::trace_id(traceparent).is_some(), "{traceparent}");
    }
}
