//! Steps that outlive one invocation (DESIGN.md "Long steps"), through the real executor
//! handler (`executor::handle`) on Postgres, LocalStack's SQS and the real Python executor:
//! the handler is driven the way Lambda's SQS event source drives it (each invocation gets the
//! function timeout; a record it does not list as a failure is deleted).
//!
//! `RARA_LONG_STEP_SECONDS` (default 12), `RARA_LONG_STEP_FUNCTION_SECONDS` (default 5) and
//! `RARA_LONG_STEP_REATTACH_SECONDS` (default 1) size the first scenario, and
//! `RARA_LONG_STEP_WINDOW_SECONDS` sets its attach window (default: none); the figures in
//! BENCHMARKS.md come from `RARA_LONG_STEP_SECONDS=180 RARA_LONG_STEP_FUNCTION_SECONDS=20
//! RARA_LONG_STEP_REATTACH_SECONDS=30 cargo test -p executor --test long_steps a_remote_step --
//! --nocapture`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_lambda_events::sqs::{SqsEvent, SqsMessage};
use lambda_runtime::{Context, LambdaEvent};
use rara_queue::Queue;
use rara_runtime::executor::BatchExecutor;
use rara_runtime::invocation::FunctionTimeout;
use rara_runtime::scheduler::Scheduler;
use rara_store::Store;
use rara_testkit::python::PythonServer;
use rara_testkit::{Queues, settings, submit};
use sqlx::PgPool;
use uuid::Uuid;

const MARGIN: Duration = Duration::from_secs(1);

fn env_secs(var: &str, default: u64) -> u64 {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

struct Lambda {
    store: Store,
    queues: Queues,
    settings: Arc<rara_runtime::settings::Settings>,
    executor: BatchExecutor,
    function_timeout: Duration,
    /// Invocations that handled a message, and the time they took (what Lambda bills).
    invocations: u32,
    billed: Duration,
}

impl Lambda {
    async fn new(pool: PgPool, python: &PythonServer, function_seconds: u64, reattach_seconds: u64) -> Lambda {
        let window = std::env::var("RARA_LONG_STEP_WINDOW_SECONDS").ok().and_then(|w| w.parse().ok());
        Self::new_with(pool, python, function_seconds, reattach_seconds, window).await
    }

    async fn new_with(
        pool: PgPool,
        python: &PythonServer,
        function_seconds: u64,
        reattach_seconds: u64,
        window_seconds: Option<u64>,
    ) -> Lambda {
        let store = Store::new(pool);
        let queues = Queues::new(function_seconds.max(30) as u32, 10).await;
        let (function, reattach) = (function_seconds.to_string(), reattach_seconds.to_string());
        let window = window_seconds.map(|w| w.to_string()).unwrap_or_default();
        let settings = Arc::new(settings(
            &queues,
            &[
                ("RARA_REMOTE_EXECUTORS", python.url()),
                ("RARA_FUNCTION_TIMEOUT_SECONDS", &function),
                ("RARA_DEADLINE_MARGIN_MS", "1000"),
                ("RARA_REATTACH_INTERVAL_SECONDS", &reattach),
                ("RARA_ATTACH_WINDOW_SECONDS", &window),
            ],
        ));
        let registry = rara_runtime::registry::standard_registry(&settings).await.unwrap();
        let executor = BatchExecutor::new(store.clone(), queues.queue(), Arc::new(registry), &settings);
        let function_timeout = settings.core.function_timeout;
        Lambda { store, queues, settings, executor, function_timeout, invocations: 0, billed: Duration::ZERO }
    }

    async fn submit_one(&self, step: &str) -> Uuid {
        let run_id = submit(&self.store, &self.settings, &format!("name: long\nsteps:\n  - {step}\n")).await;
        let scheduler = Scheduler::new(self.store.clone(), self.queues.queue(), self.settings.clone());
        assert_eq!(scheduler.pass().await.unwrap().sent, 1);
        sqlx::query_scalar("SELECT id FROM steps WHERE run_id = $1")
            .bind(run_id)
            .fetch_one(self.store.pool())
            .await
            .unwrap()
    }

    /// One invocation, as the event source makes it: the next message (waiting up to 1 s), the
    /// function timeout from now; deletes the message unless the handler returned it. `false`
    /// when no message came.
    async fn invoke(&mut self) -> bool {
        let queue = self.queues.queue();
        let Some(received) = queue.receive(1, Duration::from_secs(1)).await.unwrap().pop() else {
            return false;
        };
        let mut message = SqsMessage::default();
        message.message_id = Some(received.message_id.clone());
        message.receipt_handle = Some(received.receipt_handle.clone());
        message.body = Some(received.body);
        let mut payload = SqsEvent::default();
        payload.records = vec![message];
        let mut context = Context::default();
        context.deadline = (std::time::SystemTime::now() + self.function_timeout)
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let started = Instant::now();
        let timeout = FunctionTimeout::executor(&self.settings);
        let response =
            executor::handle(&self.executor, timeout, MARGIN, LambdaEvent::new(payload, context)).await.unwrap();
        self.billed += started.elapsed();
        self.invocations += 1;
        if !response.batch_item_failures.iter().any(|f| f.item_identifier == received.message_id) {
            queue.delete(&[received.receipt_handle]).await.unwrap();
        }
        true
    }

    async fn step(&self, step_id: Uuid) -> StepRow {
        sqlx::query_as(
            "SELECT status::text, attempt, fence, (progress->>'fraction')::float8, remote_endpoint FROM steps WHERE id = $1",
        )
        .bind(step_id)
        .fetch_one(self.store.pool())
        .await
        .unwrap()
    }

    /// (attempt, fence, outcome, error code, detached stretches) of every attempt row.
    async fn attempts(&self, step_id: Uuid) -> Vec<(i32, i64, String, Option<String>, i32)> {
        sqlx::query_as(
            "SELECT attempt, fence, outcome::text, error->>'code', jsonb_array_length(detached_spans)
             FROM step_attempts WHERE step_id = $1 ORDER BY attempt",
        )
        .bind(step_id)
        .fetch_all(self.store.pool())
        .await
        .unwrap()
    }

    /// Invokes until the step is finished (or `within` passes); the fractions of progress seen.
    async fn until_finished(&mut self, step_id: Uuid, within: Duration) -> Vec<f64> {
        let started = Instant::now();
        let mut seen = Vec::new();
        loop {
            let row = self.step(step_id).await;
            if let Some(f) = row.3
                && seen.last() != Some(&f)
            {
                seen.push(f);
            }
            if ["succeeded", "failed", "cancelled"].contains(&row.0.as_str()) {
                return seen;
            }
            assert!(started.elapsed() < within, "the step did not finish within {within:?}: {row:?}");
            self.invoke().await;
        }
    }
}

/// (status, attempt, fence, progress fraction, remote endpoint) of a step.
type StepRow = (String, i32, Option<i64>, Option<f64>, Option<String>);

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_remote_step_longer_than_an_invocation_succeeds_with_one_attempt_and_one_fence(pool: PgPool) {
    let python = PythonServer::start();
    let (seconds, function) = (env_secs("RARA_LONG_STEP_SECONDS", 12), env_secs("RARA_LONG_STEP_FUNCTION_SECONDS", 5));
    let reattach = env_secs("RARA_LONG_STEP_REATTACH_SECONDS", 1);
    let mut lambda = Lambda::new(pool, &python, function, reattach).await;
    let timeout = seconds * 2 + 60;
    let step_id = lambda
        .submit_one(&format!(
            "{{name: train, operation: sleep, version: \"1.0.0\", input: {{seconds: {seconds}}}, timeout_seconds: {timeout}, max_attempts: 1}}"
        ))
        .await;

    // The first invocation starts the attempt and parks it at its end.
    assert!(lambda.invoke().await);
    let parked = lambda.step(step_id).await;
    assert_eq!(parked.0, "leased", "parked: {parked:?}");
    assert_eq!(parked.4.as_deref(), Some(python.url()), "the step names the endpoint that runs it");
    let fence = parked.2.expect("a fence");
    let run = lambda.store.run(lambda.store.run_of_step(step_id).await.unwrap()).await.unwrap();
    assert_eq!(run.steps[0].status_text(), "running (detached)", "what rara status and rara watch show");
    assert_eq!(run.steps[0].attempts[0].detached_spans.len(), 1, "the attached stretch is in the history");

    let progress = lambda.until_finished(step_id, Duration::from_secs(seconds * 3 + reattach * 10 + 60)).await;
    let done = lambda.step(step_id).await;
    assert_eq!((done.0.as_str(), done.1, done.2), ("succeeded", 1, Some(fence)), "one attempt, one fence");
    let attempts = lambda.attempts(step_id).await;
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    let (attempt, attempt_fence, outcome, _, stretches) = attempts[0].clone();
    assert_eq!((attempt, attempt_fence, outcome.as_str()), (1, fence, "succeeded"));
    assert!(stretches >= 1, "parked at least once");
    assert!(lambda.invocations > stretches as u32, "each invocation but the last parked: {stretches}");
    assert!(progress.len() >= 3 && progress.windows(2).all(|w| w[0] < w[1]), "progress went on: {progress:?}");
    assert!(python.log().contains("detached"), "the Python side saw the attempt detach");
    println!(
        "long step: {seconds} s remote step, function timeout {function} s, re-attach every {reattach} s: 1 attempt, \
         fence {fence}, {} invocations, {:.1} Lambda-seconds billed against {seconds} attached all along \
         ({stretches} detached stretches, {} progress values)",
        lambda.invocations,
        lambda.billed.as_secs_f64(),
        progress.len()
    );
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn cancelling_a_detached_step_reaches_the_remote_attempt_at_once(pool: PgPool) {
    let python = PythonServer::start();
    let mut lambda = Lambda::new(pool, &python, 4, 1).await;
    let step_id = lambda
        .submit_one("{name: train, operation: sleep, version: \"1.0.0\", input: {seconds: 60}, timeout_seconds: 120}")
        .await;
    assert!(lambda.invoke().await);
    assert_eq!(lambda.step(step_id).await.0, "leased", "parked");

    let started = Instant::now();
    let done = rara_operator::cancel::cancel(&lambda.store, step_id, "no longer needed").await.unwrap();
    assert_eq!((done.kind, done.steps), ("step", 1));
    assert!(matches!(done.told[..], [(_, Ok(true))]), "the Python executor was told: {:?}", done.told);
    assert_eq!(lambda.step(step_id).await.0, "cancelled");
    assert!(
        python.wait_for_log("reason='the step was cancelled: no longer needed'", Duration::from_secs(5)),
        "the remote attempt heard the operator's reason: {}",
        python.log()
    );
    assert!(started.elapsed() < Duration::from_secs(2), "at once, not at the next re-attach");
    // The message of the parked step comes back and finds the step finished: acknowledged.
    while lambda.invoke().await {}
    assert_eq!(lambda.attempts(step_id).await[0].2, "cancelled");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_python_server_lost_while_detached_gives_a_new_attempt_with_a_new_fence(pool: PgPool) {
    let mut python = PythonServer::start();
    let port = python.port();
    let mut lambda = Lambda::new(pool, &python, 4, 1).await;
    let step_id = lambda
        .submit_one(
            "{name: train, operation: sleep, version: \"1.0.0\", input: {seconds: 5}, timeout_seconds: 60, max_attempts: 2, retry: {initial_delay_seconds: 0.5, max_delay_seconds: 0.5}}",
        )
        .await;
    assert!(lambda.invoke().await);
    let first_fence = lambda.step(step_id).await.2.unwrap();

    // The executor restarts on the same address while the attempt runs detached: it is lost.
    python.kill();
    let _python = PythonServer::start_on(port);
    lambda.until_finished(step_id, Duration::from_secs(60)).await;

    let attempts = lambda.attempts(step_id).await;
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    assert_eq!((attempts[0].2.as_str(), attempts[0].3.as_deref()), ("retrying", Some("ATTEMPT_NOT_FOUND")));
    assert_eq!(attempts[1].2, "succeeded");
    assert!(attempts[1].1 > first_fence, "the new attempt runs under a new fence");
    let done = lambda.step(step_id).await;
    assert_eq!((done.0.as_str(), done.1), ("succeeded", 2), "one committed outcome");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_short_attach_window_parks_early_and_pays_only_the_window(pool: PgPool) {
    let python = PythonServer::start();
    let mut lambda = Lambda::new_with(pool, &python, 20, 1, Some(1)).await;
    let step_id = lambda
        .submit_one("{name: train, operation: sleep, version: \"1.0.0\", input: {seconds: 5}, timeout_seconds: 60, max_attempts: 1}")
        .await;
    assert!(lambda.invoke().await);
    assert!(
        lambda.billed < Duration::from_secs(4),
        "parked after the 1 s window, not at the 19 s invocation end: {:?}",
        lambda.billed
    );
    assert_eq!(lambda.step(step_id).await.0, "leased", "parked");
    lambda.until_finished(step_id, Duration::from_secs(60)).await;
    let done = lambda.step(step_id).await;
    assert_eq!((done.0.as_str(), done.1), ("succeeded", 1));
    assert!(lambda.billed < Duration::from_secs(8), "billed {:?} for a 5 s step", lambda.billed);
}
