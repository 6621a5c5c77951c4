//! Every message's fate through the real executor handler (`executor::handle`), on Postgres
//! and LocalStack's SQS: a panicking executor and a panic in secret resolution bring the
//! message back and the next attempt runs; a step past its deadline, a retry beyond 12 hours
//! and a chatty executor end as a user expects (message, attempt row, step status).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use aws_lambda_events::sqs::{SqsEvent, SqsMessage};
use lambda_runtime::{Context, LambdaEvent};
use rara_domain::StepError;
use rara_domain::executor::{ExecutionContext, Executor};
use rara_queue::Queue;
use rara_runtime::executor::BatchExecutor;
use rara_runtime::invocation::FunctionTimeout;
use rara_runtime::scheduler::Scheduler;
use rara_runtime::secrets::{self, SecretResolver};
use rara_store::Store;
use rara_testkit::{Queues, settings, submit};
use sqlx::PgPool;
use uuid::Uuid;

const MARGIN: Duration = Duration::from_secs(2);

/// Panics on its first attempt, succeeds on the next.
struct PanicsOnce;

#[async_trait::async_trait]
impl Executor for PanicsOnce {
    async fn execute(&self, ctx: ExecutionContext, _input: serde_json::Value) -> Result<serde_json::Value, StepError> {
        if ctx.attempt == 1 {
            panic!("a bug in the executor");
        }
        Ok(serde_json::json!({"attempt": ctx.attempt}))
    }
}

/// Reports progress hundreds of times, then a final 1.0; answers how long it reported.
struct Chatty;

#[async_trait::async_trait]
impl Executor for Chatty {
    async fn execute(&self, ctx: ExecutionContext, _input: serde_json::Value) -> Result<serde_json::Value, StepError> {
        let started = tokio::time::Instant::now();
        for i in 0..400 {
            ctx.reporter.progress(f64::from(i) / 400.0, &format!("item {i}")).await.unwrap();
            tokio::time::sleep(Duration::from_micros(2500)).await;
        }
        ctx.reporter.progress(1.0, "done").await.unwrap();
        Ok(serde_json::json!({"reported_ms": started.elapsed().as_millis() as u64, "reports": 401}))
    }
}

/// A secret store whose first lookup panics (a bug in a resolver).
#[derive(Default)]
struct PanicsOnceResolver {
    panicked: AtomicBool,
}

#[async_trait::async_trait]
impl SecretResolver for PanicsOnceResolver {
    async fn resolve(&self, name: &str) -> Result<String, secrets::Error> {
        if !self.panicked.swap(true, Ordering::SeqCst) {
            panic!("a bug in the secret resolver");
        }
        Ok(format!("value-of-{name}"))
    }
}

struct Harness {
    store: Store,
    queues: Queues,
    settings: Arc<rara_runtime::settings::Settings>,
    executor: BatchExecutor,
}

impl Harness {
    async fn new(pool: PgPool) -> Harness {
        let store = Store::new(pool);
        let queues = Queues::new(30, 10).await;
        let settings = Arc::new(settings(&queues, &[]));
        let mut registry = rara_runtime::registry::standard_registry(&settings).await.unwrap();
        registry.register("test.panics_once", PanicsOnce).unwrap();
        registry.register("test.chatty", Chatty).unwrap();
        let executor = BatchExecutor::new(store.clone(), queues.queue(), Arc::new(registry), &settings);
        Harness { store, queues, settings, executor }
    }

    /// Submits a one-step workflow and lets the scheduler send its message.
    async fn submit_one(&self, step: &str) -> (Uuid, Uuid) {
        let run_id = submit(&self.store, &self.settings, &format!("name: one\nsteps:\n  - {step}\n")).await;
        let scheduler = Scheduler::new(self.store.clone(), self.queues.queue(), self.settings.clone());
        assert_eq!(scheduler.pass().await.unwrap().sent, 1);
        let step_id = sqlx::query_scalar("SELECT id FROM steps WHERE run_id = $1")
            .bind(run_id)
            .fetch_one(self.store.pool())
            .await
            .unwrap();
        (run_id, step_id)
    }

    /// Receives the next message (waiting up to `wait`) and hands it to the Lambda handler.
    /// Returns its message id and whether the handler listed it as a batch item failure.
    async fn deliver(&self, wait: Duration) -> (String, bool) {
        let deadline = tokio::time::Instant::now() + wait;
        let received = loop {
            let mut got = self.queues.queue().receive(1, Duration::from_secs(1)).await.unwrap();
            if let Some(m) = got.pop() {
                break m;
            }
            assert!(tokio::time::Instant::now() < deadline, "no message came within {wait:?}");
        };
        let mut message = SqsMessage::default();
        message.message_id = Some(received.message_id.clone());
        message.receipt_handle = Some(received.receipt_handle);
        message.body = Some(received.body);
        let mut payload = SqsEvent::default();
        payload.records = vec![message];
        let mut context = Context::default();
        context.deadline = (std::time::SystemTime::now() + Duration::from_secs(20))
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let timeout = FunctionTimeout::executor(&self.settings);
        let response =
            executor::handle(&self.executor, timeout, MARGIN, LambdaEvent::new(payload, context)).await.unwrap();
        let returned = response.batch_item_failures.iter().any(|f| f.item_identifier == received.message_id);
        assert!(response.batch_item_failures.len() <= 1);
        (received.message_id, returned)
    }

    async fn step(&self, step_id: Uuid) -> (String, i32) {
        sqlx::query_as("SELECT status::text, attempt FROM steps WHERE id = $1")
            .bind(step_id)
            .fetch_one(self.store.pool())
            .await
            .unwrap()
    }

    /// (attempt, outcome, error code) of every attempt row, in order.
    async fn attempts(&self, step_id: Uuid) -> Vec<(i32, String, Option<String>)> {
        sqlx::query_as(
            "SELECT attempt, outcome::text, error->>'code' FROM step_attempts WHERE step_id = $1 ORDER BY attempt",
        )
        .bind(step_id)
        .fetch_all(self.store.pool())
        .await
        .unwrap()
    }
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_panicking_executor_brings_its_message_back_and_the_next_attempt_runs(pool: PgPool) {
    let h = Harness::new(pool).await;
    let (_, step_id) = h
        .submit_one("{name: a, operation: test.panics_once, max_attempts: 2, retry: {initial_delay_seconds: 0.5, max_delay_seconds: 0.5}}")
        .await;

    let (_, returned) = h.deliver(Duration::from_secs(5)).await;
    assert!(returned, "a panic must never acknowledge its message");
    assert_eq!(h.step(step_id).await, ("leased".into(), 1), "the retry waits on the same message");
    assert_eq!(h.attempts(step_id).await, vec![(1, "retrying".into(), Some("EXECUTOR_PANICKED".into()))]);

    let (_, returned) = h.deliver(Duration::from_secs(10)).await;
    assert!(!returned, "the second attempt succeeded and its message is acknowledged");
    assert_eq!(h.step(step_id).await, ("succeeded".into(), 2));
    assert_eq!(h.attempts(step_id).await[1], (2, "succeeded".into(), None));
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_panic_in_secret_resolution_brings_the_message_back_and_the_next_attempt_runs(pool: PgPool) {
    let mut h = Harness::new(pool).await;
    h.executor = h.executor.clone().with_secrets(Arc::new(PanicsOnceResolver::default()));
    h.store.grant_secret("api", "one", "noop", None).await.unwrap();
    let (_, step_id) = h
        .submit_one("{name: a, operation: noop, input: {token: {$secret: api}}, max_attempts: 2, retry: {initial_delay_seconds: 0.5, max_delay_seconds: 0.5}}")
        .await;

    let (_, returned) = h.deliver(Duration::from_secs(5)).await;
    assert!(returned, "a panic outside the executor's own guard must not acknowledge either");
    assert_eq!(h.attempts(step_id).await, vec![(1, "retrying".into(), Some("EXECUTOR_PANICKED".into()))]);

    let (_, returned) = h.deliver(Duration::from_secs(10)).await;
    assert!(!returned);
    assert_eq!(h.step(step_id).await, ("succeeded".into(), 2));
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_step_past_its_deadline_fails_with_deadline_exceeded_and_is_acknowledged(pool: PgPool) {
    let h = Harness::new(pool).await;
    let (run_id, step_id) =
        h.submit_one("{name: a, operation: sleep, input: {seconds: 30}, timeout_seconds: 1, max_attempts: 1}").await;

    let (_, returned) = h.deliver(Duration::from_secs(5)).await;
    assert!(!returned, "the failure is recorded: nothing to come back for");
    assert_eq!(h.step(step_id).await, ("failed".into(), 1));
    assert_eq!(h.attempts(step_id).await, vec![(1, "failed".into(), Some("DEADLINE_EXCEEDED".into()))]);
    let run: String = sqlx::query_scalar("SELECT status::text FROM workflow_runs WHERE id = $1")
        .bind(run_id)
        .fetch_one(h.store.pool())
        .await
        .unwrap();
    assert_eq!(run, "failed");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_retry_beyond_12_hours_goes_back_to_postgres_and_its_message_is_acknowledged(pool: PgPool) {
    let h = Harness::new(pool).await;
    // The failure asks for a day's wait (as a `Retry-After: 86400` would): beyond SQS's 12 h.
    let (_, step_id) = h
        .submit_one(
            "{name: a, operation: fail, input: {fail_attempts: 1, retry_after_seconds: 86400}, max_attempts: 2}",
        )
        .await;

    let (_, returned) = h.deliver(Duration::from_secs(5)).await;
    assert!(!returned, "a retry beyond the visibility limit does not ride on the message");
    let (status, token, due_in_hours): (String, Option<Uuid>, f64) = sqlx::query_as(
        "SELECT status::text, lease_token, (extract(epoch FROM next_run_at - now()) / 3600)::float8 FROM steps WHERE id = $1",
    )
    .bind(step_id)
    .fetch_one(h.store.pool())
    .await
    .unwrap();
    assert_eq!((status.as_str(), token), ("pending", None), "back to pending, lease cleared");
    assert!((23.9..=24.0).contains(&due_in_hours), "due in {due_in_hours} h");
    let retry_matches: bool = sqlx::query_scalar(
        "SELECT a.retry_at = s.next_run_at FROM step_attempts a JOIN steps s ON s.id = a.step_id
         WHERE a.step_id = $1 AND a.attempt = 1 AND a.outcome = 'retrying'",
    )
    .bind(step_id)
    .fetch_one(h.store.pool())
    .await
    .unwrap();
    assert!(retry_matches, "the attempt row says when the next attempt is due");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_chatty_executor_is_throttled_and_its_final_progress_is_recorded(pool: PgPool) {
    let h = Harness::new(pool).await;
    // Count the progress writes that reach the table.
    sqlx::raw_sql(
        "CREATE TABLE progress_writes (at timestamptz NOT NULL DEFAULT clock_timestamp());
         CREATE FUNCTION count_progress() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN INSERT INTO progress_writes DEFAULT VALUES; RETURN NEW; END $$;
         CREATE TRIGGER count_progress AFTER UPDATE OF progress ON steps FOR EACH ROW
           WHEN (NEW.progress IS NOT NULL) EXECUTE FUNCTION count_progress();",
    )
    .execute(h.store.pool())
    .await
    .unwrap();
    let (_, step_id) = h.submit_one("{name: a, operation: test.chatty}").await;

    let (_, returned) = h.deliver(Duration::from_secs(5)).await;
    assert!(!returned);
    let (status, output, fraction, message): (String, serde_json::Value, f64, String) = sqlx::query_as(
        "SELECT status::text, output, (progress->>'fraction')::float8, progress->>'message' FROM steps WHERE id = $1",
    )
    .bind(step_id)
    .fetch_one(h.store.pool())
    .await
    .unwrap();
    assert_eq!(status, "succeeded");
    assert_eq!((fraction, message.as_str()), (1.0, "done"), "the final progress is always written");
    let writes: i64 =
        sqlx::query_scalar("SELECT count(*) FROM progress_writes").fetch_one(h.store.pool()).await.unwrap();
    let reported_ms = output["reported_ms"].as_u64().unwrap();
    let interval_ms = h.settings.progress_interval.as_millis() as u64;
    // One write per interval at most, plus the first and the final one.
    let allowed = reported_ms / interval_ms + 2;
    assert!(
        writes >= 2 && writes as u64 <= allowed,
        "{writes} writes for 401 reports in {reported_ms} ms (allowed {allowed})"
    );
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn oversized_poison_reaches_the_dlq_with_its_reason_on_its_first_receive(pool: PgPool) {
    let h = Harness::new(pool).await;
    for size in [1_048_576usize, 1_048_456] {
        let body = "x".repeat(size);
        h.queues.send_raw(&body).await;
        let (_, returned) = h.deliver(Duration::from_secs(10)).await;
        assert!(!returned, "a {size}-byte body is dead-lettered on its first receive");
        let dead = h.queues.drain(&h.queues.dlq_url).await;
        assert_eq!(dead.len(), 1, "one DLQ copy of the {size}-byte body");
        let attributes = dead[0].message_attributes.clone().unwrap_or_default();
        let value = |name: &str| attributes.get(name).and_then(|v| v.string_value.clone());
        assert_eq!(value(rara_queue::sqs::DLQ_REASON_CODE).as_deref(), Some("MESSAGE_TOO_LARGE"));
        assert!(value(rara_queue::sqs::DLQ_REASON).unwrap().contains(&format!("{size} bytes")));
        assert_eq!(value(rara_queue::sqs::DLQ_ORIGINAL_BYTES), Some(size.to_string()));
        assert_eq!(value(rara_queue::sqs::DLQ_ORIGINAL_SHA256).map(|d| d.len()), Some(64));
        assert!(body.starts_with(dead[0].body.as_deref().unwrap()), "the DLQ copy is the body's prefix");
    }
}
