//! Data flow end to end (DESIGN.md "Data flow"), on Postgres + LocalStack's SQS through the
//! local scheduler and executor runners: a step's input takes an upstream output (through a
//! pointer), an upstream artifact's descriptor and a run input; the attempt records the input
//! it ran with; a reference that finds nothing fails the step for good without running it; a
//! `$secret` inside an upstream output is never resolved.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use rara_domain::StepError;
use rara_domain::executor::{Artifact, ExecutionContext, Executor};
use rara_domain::step_error::codes;
use rara_runtime::executor::BatchExecutor;
use rara_store::Store;
use serde_json::{Value, json};
use sqlx::PgPool;

const LIMIT: Duration = Duration::from_secs(60);
const SECRET: &str = "s3cr3t-d4ta-fl0w";

/// `test.fetch`: reports the artifact `report` and returns a body, a `$secret` reference (as
/// an executor that echoes a reference back might) and `big`, a long string.
struct Fetch;

#[async_trait::async_trait]
impl Executor for Fetch {
    async fn execute(&self, ctx: ExecutionContext, _input: Value) -> Result<Value, StepError> {
        let report = Artifact {
            name: "report".into(),
            uri: "s3://bucket/report.txt".into(),
            media_type: Some("text/plain".into()),
            size_bytes: Some(42),
            digest: Some("sha256:abc".into()),
        };
        ctx.reporter.artifact(report).await.map_err(|e| StepError::retryable("REPORT", e.to_string()))?;
        Ok(json!({"body": "hello", "leak": {"$secret": "api"}, "big": "x".repeat(3000)}))
    }
}

/// A stack whose registry also has `test.fetch` and `test.echo`, and whose secrets come from
/// [`Vault`].
async fn stack(pool: PgPool, extra: &[(&str, &str)]) -> (Store, Stack, Echo) {
    let store = Store::new(pool);
    let queues = Queues::new(30, 10).await;
    let settings = Arc::new(settings(&queues, extra));
    let echo = Echo::default();
    let mut registry = rara_runtime::registry::standard_registry(&settings).await.unwrap();
    registry.register("test.fetch", Fetch).unwrap().register("test.echo", echo.clone()).unwrap();
    let queue = queues.queue();
    let executor = BatchExecutor::new(store.clone(), queue.clone(), Arc::new(registry), &settings)
        .with_secrets(Arc::new(Vault(SECRET)));
    store.grant_secret("api", "*", "test.echo", None).await.unwrap();
    (store.clone(), Stack { store, queue, settings, executor }, echo)
}

// `date` is not given at submit: its declared default reaches `summarise` through `$input`.
const FLOW: &str = "name: flow
inputs: {date: {type: string, default: '2026-12-04'}}
steps:
  - {name: fetch, operation: test.fetch}
  - {name: middle, operation: noop, depends_on: [fetch]}
  - name: summarise
    operation: test.echo
    depends_on: [middle]
    input:
      text: {$output: fetch, pointer: /body}
      report: {$artifact: fetch, name: report}
      date: {$input: /date}
      leak: {$output: fetch, pointer: /leak}
      key: {$secret: api}
";

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn an_output_an_artifact_and_a_run_input_flow_into_a_dependent_and_its_attempt_records_them(pool: PgPool) {
    let (store, stack, echo) = stack(pool, &[]).await;
    let run_id = submit(&store, &stack.settings, FLOW).await;
    let (status, _) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "succeeded");

    let report =
        json!({"uri": "s3://bucket/report.txt", "media_type": "text/plain", "size_bytes": 42, "digest": "sha256:abc"});
    // What the executor was called with: references substituted, its own secret resolved, the
    // `$secret` that came in with the upstream output escaped (never resolved).
    let calls = echo.0.lock().unwrap().clone();
    assert_eq!(
        calls,
        [json!({"text": "hello", "report": report, "date": "2026-12-04", "leak": {"$$secret": "api"}, "key": SECRET})]
    );
    // What history shows: the same input, with the step's secret reference kept as a reference.
    let run = store.run(run_id).await.unwrap();
    let summarise = run.steps.iter().find(|s| s.name == "summarise").unwrap();
    assert_eq!(summarise.attempts.len(), 1);
    assert_eq!(
        summarise.attempts[0].input,
        Some(
            json!({"text": "hello", "report": report, "date": "2026-12-04", "leak": {"$$secret": "api"}, "key": {"$secret": "api"}})
        )
    );
    assert_eq!(summarise.output.as_ref().unwrap()["key"], json!("***"), "the resolved secret is redacted");
    // The stored definition keeps its references; steps without references record nothing more.
    let stored: Value = sqlx::query_scalar("SELECT input FROM steps WHERE id = $1")
        .bind(summarise.id)
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(stored["text"], json!({"$output": "fetch", "pointer": "/body"}));
    assert!(run.steps.iter().filter(|s| s.name != "summarise").all(|s| s.attempts[0].input.is_none()));
    // No secret value in any row.
    let rows: String = sqlx::query_scalar(
        "SELECT concat_ws(' ', (SELECT string_agg(concat_ws(' ', input, output, error), ' ') FROM steps),
                              (SELECT string_agg(concat_ws(' ', input, error), ' ') FROM step_attempts))",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert!(!rows.contains(SECRET), "a secret value reached the database");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_pointer_that_finds_nothing_fails_the_step_for_good_without_running_it(pool: PgPool) {
    let (store, stack, echo) = stack(pool, &[]).await;
    let run_id = submit(
        &store,
        &stack.settings,
        "name: missing\nsteps:\n  - {name: fetch, operation: test.fetch}\n  - {name: summarise, operation: test.echo, depends_on: [fetch], max_attempts: 3, input: {text: {$output: fetch, pointer: /bdy}}}\n  - {name: after, operation: noop, depends_on: [summarise]}\n",
    )
    .await;
    let (status, counters) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "failed");
    assert_eq!((counters.failed, counters.retried), (1, 0));
    assert!(echo.0.lock().unwrap().is_empty(), "the executor never ran");
    assert_eq!(step_status(&store, run_id, "summarise").await, "failed");
    assert_eq!(step_status(&store, run_id, "after").await, "skipped");
    let run = store.run(run_id).await.unwrap();
    let summarise = run.steps.iter().find(|s| s.name == "summarise").unwrap();
    let error = &summarise.error.as_ref().unwrap().0;
    assert_eq!((error.code.as_str(), error.retryable), (codes::INPUT_REFERENCE_MISSING, false));
    assert_eq!(error.message, r#"input.text: the output of step "fetch" has nothing at "/bdy""#);
    assert_eq!(summarise.attempt, 1, "a permanent failure is not retried");
    assert_eq!(summarise.attempts[0].input, None, "no input ran");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_resolved_input_over_the_size_limit_fails_the_step_for_good(pool: PgPool) {
    let (store, stack, echo) = stack(pool, &[("RARA_MAX_INPUT_BYTES", "1000")]).await;
    let run_id = submit(
        &store,
        &stack.settings,
        "name: big\nsteps:\n  - {name: fetch, operation: test.fetch}\n  - {name: summarise, operation: test.echo, depends_on: [fetch], input: {all: {$output: fetch, pointer: /big}}}\n",
    )
    .await;
    let (status, _) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "failed");
    assert!(echo.0.lock().unwrap().is_empty(), "the executor never ran");
    let run = store.run(run_id).await.unwrap();
    let error = &run.steps[1].error.as_ref().unwrap().0;
    assert_eq!((error.code.as_str(), error.retryable), (codes::INVALID_INPUT, false));
    assert!(error.message.contains("at most 1000 are allowed (RARA_MAX_INPUT_BYTES)"), "{}", error.message);
    assert!(!error.message.contains("xxx"), "no value is echoed");
}
