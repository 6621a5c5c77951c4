//! The scheduler Lambda's handler with a `LambdaEvent` built from the committed fixture
//! (`tests/fixtures/scheduled-event.json`), against Postgres and LocalStack's SQS.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use lambda_runtime::{Context, LambdaEvent};
use rara_queue::Queue;
use rara_runtime::scheduler::Scheduler;
use rara_store::Store;
use rara_testkit::{Queues, settings, submit};
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

    // A zero budget: one pass, then answer.
    let counters =
        scheduler::handle(&scheduler, Duration::ZERO, Duration::from_secs(1), common::scheduled_event()).await.unwrap();
    assert_eq!((counters.leased, counters.sent, counters.released), (2, 2, 0), "c waits for a");

    // Both in one message (`RARA_STEPS_PER_MESSAGE`, 10 by default).
    let messages = queues.queue().receive(10, Duration::from_secs(1)).await.unwrap();
    assert_eq!(messages.len(), 1);
    let due: Vec<uuid::Uuid> =
        sqlx::query_scalar("SELECT id FROM steps WHERE run_id = $1 AND status = 'leased' ORDER BY name")
            .bind(run_id)
            .fetch_all(store.pool())
            .await
            .unwrap();
    let steps = rara_queue::parse_steps(&messages[0].body).expect("only identifiers travel");
    let mut named: Vec<uuid::Uuid> = steps.iter().map(|s| s.message.step_id).collect();
    named.sort();
    let mut due = due;
    due.sort();
    assert_eq!(named, due);
    for step in &steps {
        let traceparent = step.traceparent.as_deref().expect("each step carries its run's trace context");
        assert!(rara_runtime::trace_id(traceparent).is_some(), "{traceparent}");
    }
    let attribute = messages[0].traceparent.as_deref().expect("and the message its first step's, as an attribute");
    assert_eq!(Some(attribute), steps[0].traceparent.as_deref());
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn with_a_silent_sqs_the_handler_returns_before_its_deadline_and_releases_what_it_leased(pool: PgPool) {
    let store = Store::new(pool);
    let queues = Queues::new(30, 10).await;
    // SDK deadlines beyond the invocation: only the invocation's deadline may bound the call.
    let settings = Arc::new(settings(
        &queues,
        &[("RARA_SQS_ATTEMPT_TIMEOUT_MS", "30000"), ("RARA_SQS_OPERATION_TIMEOUT_MS", "60000")],
    ));
    let run_id = submit(&store, &settings, "name: one\nsteps:\n  - {name: a, operation: noop}\n").await;
    let peer = rara_testkit::SilentPeer::start(rara_testkit::endpoint_addr(), true).await;
    let scheduler = Scheduler::new(store.clone(), queues.queue_through(&peer, &settings.timeouts).await, settings);

    let mut context = Context::default();
    let deadline = std::time::SystemTime::now() + Duration::from_secs(4);
    context.deadline = deadline.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let budget = Duration::from_secs(50);
    let counters =
        scheduler::handle(&scheduler, budget, Duration::from_secs(1), LambdaEvent::new(serde_json::json!({}), context))
            .await
            .unwrap();
    assert!(std::time::SystemTime::now() < deadline, "the handler answered before the invocation's deadline");
    assert_eq!((counters.leased, counters.sent, counters.released), (1, 0, 1));
    let (status, token): (String, Option<uuid::Uuid>) =
        sqlx::query_as("SELECT status::text, lease_token FROM steps WHERE run_id = $1")
            .bind(run_id)
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!((status.as_str(), token), ("pending", None), "every unsent message's step released");
}

/// Issue 14: `cargo lambda watch` sends `Lambda-Runtime-Deadline-Ms: 600000` (1970). The
/// scheduler still makes its pass and sends what it leased, instead of releasing it all.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_deadline_in_1970_as_cargo_lambda_watch_sends_still_leases_and_sends(pool: PgPool) {
    let store = Store::new(pool);
    let queues = Queues::new(30, 10).await;
    let settings = Arc::new(settings(&queues, &[]));
    submit(&store, &settings, "name: one\nsteps:\n  - {name: a, operation: noop}\n").await;
    let scheduler = Scheduler::new(store.clone(), queues.queue(), settings);

    let mut context = Context::default();
    context.deadline = 600_000;
    let started = std::time::Instant::now();
    let counters = scheduler::handle(
        &scheduler,
        Duration::ZERO,
        Duration::from_secs(1),
        LambdaEvent::new(serde_json::json!({}), context),
    )
    .await
    .unwrap();
    assert_eq!((counters.leased, counters.sent, counters.released), (1, 1, 0));
    assert!(started.elapsed() < Duration::from_secs(10), "a zero budget is one pass, whatever the deadline");
    assert_eq!(queues.queue().receive(10, Duration::from_secs(1)).await.unwrap().len(), 1);
}
