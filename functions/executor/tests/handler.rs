//! The executor Lambda's handler with `LambdaEvent`s built from the committed fixture
//! (`tests/fixtures/sqs-event.json`), against Postgres and LocalStack's SQS.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{Context, LambdaEvent};
use rara_domain::state::RunStatus;
use rara_queue::Queue;
use rara_runtime::executor::BatchExecutor;
use rara_runtime::invocation::FunctionTimeout;
use rara_store::Store;
use rara_testkit::{Queues, repo_root, settings, submit};
use sqlx::PgPool;

fn fixture() -> SqsEvent {
    let text = std::fs::read_to_string(repo_root().join("tests/fixtures/sqs-event.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn event(payload: SqsEvent) -> LambdaEvent<SqsEvent> {
    let deadline_ms = (std::time::SystemTime::now() + Duration::from_secs(20))
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    event_with_deadline(payload, deadline_ms)
}

fn event_with_deadline(payload: SqsEvent, deadline_ms: u64) -> LambdaEvent<SqsEvent> {
    let mut context = Context::default();
    context.deadline = deadline_ms;
    LambdaEvent::new(payload, context)
}

async fn executor(store: &Store, queues: &Queues) -> BatchExecutor {
    let settings = settings(queues, &[]);
    let registry = rara_runtime::registry::standard_registry(&settings).await.unwrap();
    BatchExecutor::new(store.clone(), queues.queue(), Arc::new(registry), &settings)
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn fixture_poison_goes_to_the_dlq_and_nothing_comes_back(pool: PgPool) {
    let store = Store::new(pool);
    let queues = Queues::new(30, 10).await;
    let executor = executor(&store, &queues).await;
    let timeout = FunctionTimeout::executor(&settings(&queues, &[]));
    let response = executor::handle(&executor, timeout, Duration::from_secs(2), event(fixture())).await.unwrap();
    assert!(response.batch_item_failures.is_empty(), "both messages were settled (dead-lettered)");
    let mut codes: Vec<String> = queues.dead_letters().await.into_iter().filter_map(|(_, c)| c).collect();
    codes.sort();
    assert_eq!(codes, vec!["MALFORMED_MESSAGE", "UNKNOWN_STEP"]);
}

/// Submits `yaml`, lets the scheduler send its one message, and hands that message to the
/// handler in the fixture's shape, with the runtime's deadline `deadline_ms`.
async fn run_one(pool: PgPool, yaml: &str, deadline_ms: Option<u64>) -> (Store, uuid::Uuid, SqsBatchResponse) {
    let store = Store::new(pool);
    let queues = Queues::new(30, 10).await;
    let settings = settings(&queues, &[]);
    let run_id = submit(&store, &settings, yaml).await;
    let timeout = FunctionTimeout::executor(&settings);
    let scheduler = rara_runtime::scheduler::Scheduler::new(store.clone(), queues.queue(), Arc::new(settings));
    assert_eq!(scheduler.pass().await.unwrap().sent, 1);
    let received = queues.queue().receive(1, Duration::from_secs(2)).await.unwrap().remove(0);

    let mut payload = fixture();
    payload.records.truncate(1);
    payload.records[0].body = Some(received.body);
    payload.records[0].receipt_handle = Some(received.receipt_handle);
    let event = match deadline_ms {
        Some(deadline_ms) => event_with_deadline(payload, deadline_ms),
        None => event(payload),
    };
    let executor = executor(&store, &queues).await;
    let response = executor::handle(&executor, timeout, Duration::from_secs(2), event).await.unwrap();
    (store, run_id, response)
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_real_message_in_the_fixture_shape_runs_its_step(pool: PgPool) {
    let (store, run_id, response) = run_one(pool, "name: one\nsteps:\n  - {name: a, operation: noop}\n", None).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(store.run(run_id).await.unwrap().status, RunStatus::Succeeded);
}

/// Issue 14: `cargo lambda watch` sends `Lambda-Runtime-Deadline-Ms: 600000` (1970). The step
/// gets the function timeout (20 s here) instead of no time at all.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_deadline_in_1970_as_cargo_lambda_watch_sends_still_gives_the_step_the_function_timeout(pool: PgPool) {
    let yaml = "name: one\nsteps:\n  - {name: a, operation: sleep, input: {seconds: 0.5}, max_attempts: 1}\n";
    let started = std::time::Instant::now();
    let (store, run_id, response) = run_one(pool, yaml, Some(600_000)).await;
    assert!(response.batch_item_failures.is_empty());
    let run = store.run(run_id).await.unwrap();
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.steps[0].error);
    assert!(started.elapsed() < Duration::from_secs(15));
}
