//! Child workflows (docs/src/guide/recover.md "Child workflows") through the scheduler and the
//! executor on Postgres + LocalStack's SQS: a step runs a registered workflow and waits for it;
//! the child's outputs flow into the parent's next step; an executor killed while the child
//! runs changes nothing (one child run, by its key); cancelling the parent cancels the child;
//! a failed child fails its parent step with its cause; a map runs one child per element; and
//! a workflow that runs itself stops at the depth bound.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use rara_domain::workflow::child::MAX_CHILD_DEPTH;
use rara_domain::workflow::{Format, WorkflowDefinition};
use rara_platform::runner::run_executor;
use rara_queue::Queue;
use rara_runtime::executor::BatchExecutor;
use serde_json::{Value, json};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

const LIMIT: Duration = Duration::from_secs(90);

/// Registers `yaml` (its name) as a new version.
async fn register(store: &rara_store::Store, yaml: &str) {
    let definition = WorkflowDefinition::parse(yaml, Format::Yaml).unwrap();
    store.register_definition(&definition.name, &serde_json::to_value(&definition).unwrap()).await.unwrap();
}

async fn scalar<T>(pool: &PgPool, sql: &str, id: Uuid) -> T
where
    T: for<'r> sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres> + Send + Unpin,
{
    sqlx::query_scalar(sql).bind(id).fetch_one(pool).await.unwrap()
}

/// Whether `sql` (one parameter, `id`) answers `true`, as a condition of [`run_until`].
fn holds(
    pool: &PgPool,
    sql: &'static str,
    id: Uuid,
) -> impl FnMut() -> std::pin::Pin<Box<dyn Future<Output = bool> + Send>> {
    let pool = pool.clone();
    move || {
        let pool = pool.clone();
        Box::pin(async move { scalar::<bool>(&pool, sql, id).await })
    }
}

/// The scheduler and the executor of `stack`, running until `until` holds (polled every 100 ms,
/// at most [`LIMIT`]); then both are aborted, as a killed process stops: no grace, nothing
/// given back.
async fn run_until<F, Fut>(stack: &Stack, mut until: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let scheduler = stack.scheduler();
    let sched = tokio::spawn(async move { scheduler.run(None, CancellationToken::new()).await });
    let executor = stack.executor.clone();
    let queue: Arc<dyn Queue> = stack.queue.clone();
    let options = stack.runner_options(None);
    let exec = tokio::spawn(async move { run_executor(&executor, queue, &options, CancellationToken::new()).await });
    let started = tokio::time::Instant::now();
    while !until().await {
        assert!(started.elapsed() < LIMIT, "not reached within {LIMIT:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    sched.abort();
    exec.abort();
}

const EVAL: &str = "name: eval-suite
inputs:
  model: {type: string}
steps:
  - {name: score, operation: test.echo, input: {step: score, model: {$input: /model}}}
  - {name: nap, operation: sleep, depends_on: [score], input: {seconds: 2}}
output:
  score: {$output: score, pointer: /model}
";

/// Whether the child of the parent run `$1`'s step `evaluate` is sleeping in its `nap`.
const CHILD_NAPS: &str = "SELECT EXISTS (SELECT 1 FROM steps s JOIN workflow_runs r ON r.id = s.run_id \
    JOIN steps p ON p.id = r.parent_step_id WHERE p.run_id = $1 AND s.name = 'nap' AND s.status = 'running')";

const PARENT: &str = "name: pipeline
steps:
  - {name: train, operation: test.echo, input: {step: train, uri: s3://models/7}}
  - name: evaluate
    depends_on: [train]
    run: {workflow: eval-suite, version: \"1\", inputs: {model: {$output: train, pointer: /uri}}}
  - {name: report, operation: test.echo, depends_on: [evaluate], input: {step: report, score: {$output: evaluate, pointer: /output/score}}}
";

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_childs_outputs_flow_on_and_a_killed_executor_changes_nothing(pool: PgPool) {
    let (store, _queues, stack, echo) = Stack::with_echo(pool.clone()).await;
    register(&store, EVAL).await;
    let parent = submit(&store, &stack.settings, PARENT).await;

    // Until the child runs (its nap sleeps), then the scheduler and the executor are killed.
    run_until(&stack, holds(&pool, CHILD_NAPS, parent)).await;
    let evaluate: Uuid = scalar(&pool, "SELECT id FROM steps WHERE run_id = $1 AND name = 'evaluate'", parent).await;
    assert_eq!(step_status(&store, parent, "evaluate").await, "waiting", "the step waits, holding nothing");
    let held: Option<String> = scalar(&pool, "SELECT leased_by FROM steps WHERE id = $1", evaluate).await;
    assert_eq!(held, None);

    // A new executor and scheduler (the killed one's lease on the nap expires and is reaped).
    let mut registry = rara_runtime::registry::standard_registry(&stack.settings).await.unwrap();
    registry.register("test.echo", echo.clone()).unwrap();
    let executor = BatchExecutor::new(store.clone(), stack.queue.clone(), Arc::new(registry), &stack.settings);
    let again = Stack { store: store.clone(), queue: stack.queue.clone(), settings: stack.settings.clone(), executor };
    run_until(&again, holds(&pool, "SELECT status = 'succeeded' FROM workflow_runs WHERE id = $1", parent)).await;

    let key = format!("child:{evaluate}:1");
    let children: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM workflow_runs WHERE idempotency_key = $1")
        .bind(&key)
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(children.len(), 1, "exactly one child run for the parent's attempt");
    let child = store.run(children[0]).await.unwrap();
    assert_eq!((child.status.as_str(), child.workflow_version), ("succeeded", Some(1)));
    let linked: (Uuid, i32) = sqlx::query_as("SELECT parent_step_id, parent_attempt FROM workflow_runs WHERE id = $1")
        .bind(child.id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(linked, (evaluate, 1), "the child names its parent step and attempt");
    let link = |run_id| rara_store::read::RunLink { run_id, step: "evaluate".into(), attempt: 1 };
    assert_eq!(child.parent, Some(link(parent)), "status shows the parent");
    assert_eq!(store.run(parent).await.unwrap().children, vec![link(child.id)], "and the parent its child");

    let view = store.run(parent).await.unwrap();
    assert_eq!(view.status.as_str(), "succeeded");
    let step = view.steps.iter().find(|s| s.name == "evaluate").unwrap();
    let output = step.output.clone().unwrap();
    assert_eq!(output["run_id"], json!(child.id), "the parent step names its child");
    assert_eq!(output["output"], json!({"score": "s3://models/7"}));
    assert_eq!(step.attempts.len(), 1);
    let reported = echo.0.lock().unwrap().iter().find(|i| i["step"] == "report").cloned().unwrap();
    assert_eq!(reported["score"], "s3://models/7", "the child's output reached the next step");
    let scored = echo.0.lock().unwrap().iter().filter(|i| i["step"] == "score").count();
    assert_eq!(scored, 1, "the child's first step ran once");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn cancelling_the_parent_cancels_the_child(pool: PgPool) {
    let (store, _queues, stack, _echo) = Stack::with_echo(pool.clone()).await;
    register(&store, &EVAL.replace("seconds: 2", "seconds: 60")).await;
    let parent = submit(&store, &stack.settings, PARENT).await;
    run_until(&stack, holds(&pool, CHILD_NAPS, parent)).await;
    let child: Uuid = scalar(
        &pool,
        "SELECT r.id FROM workflow_runs r JOIN steps p ON p.id = r.parent_step_id WHERE p.run_id = $1",
        parent,
    )
    .await;
    store.cancel_run(parent, "operator: wrong model").await.unwrap();
    run_until(&stack, holds(&pool, "SELECT status <> 'running' FROM workflow_runs WHERE id = $1", child)).await;

    let view = store.run(child).await.unwrap();
    assert_eq!(view.status.as_str(), "cancelled");
    let nap = view.steps.iter().find(|s| s.name == "nap").unwrap();
    let error = nap.error.as_ref().unwrap();
    assert_eq!((error.code.as_str(), &error.details), ("CANCELLED", &json!({"cancelled": "parent"})));
    assert_eq!(step_status(&store, parent, "evaluate").await, "cancelled");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_failed_child_fails_its_step_a_map_runs_one_child_each_and_depth_is_bounded(pool: PgPool) {
    let (store, _queues, stack, _echo) = Stack::with_echo(pool.clone()).await;
    register(&store, "name: flaky\ninputs: {n: {type: integer}}\nsteps:\n  - {name: check, operation: fail, max_attempts: 1, input: {fail_attempts: {$input: /n}, retryable: false}}\n").await;
    register(&store, "name: recurse\nsteps:\n  - {name: again, run: {workflow: recurse}}\n").await;
    let parent = submit(
        &store,
        &stack.settings,
        "name: many\nsteps:\n  - name: each\n    for_each: [0, 0]\n    run: {workflow: flaky, inputs: {n: {$item: \"\"}}}\n  \
         - {name: bad, run: {workflow: flaky, inputs: {n: 5}}}\n  - {name: missing, run: {workflow: nowhere}}\n  \
         - {name: deep, run: {workflow: recurse}}\n",
    )
    .await;
    run_until(&stack, holds(&pool, "SELECT status <> 'running' FROM workflow_runs WHERE id = $1", parent)).await;
    let view = store.run(parent).await.unwrap();
    let step = |name: &str| view.steps.iter().find(|s| s.name == name).unwrap().clone();
    let each = step("each");
    assert_eq!(each.status.as_str(), "succeeded", "{each:?}");
    let outputs = each.output.unwrap();
    assert_eq!(outputs.as_array().map(Vec::len), Some(2), "one child run per element: {outputs}");
    assert!(outputs.as_array().unwrap().iter().all(|o| o["status"] == "succeeded"));

    let bad = step("bad").error.unwrap().0;
    assert_eq!(bad.code, "CHILD_WORKFLOW_FAILED");
    assert_eq!(bad.details["step"], "check");
    assert_eq!(bad.details["status"], "failed");
    let missing = step("missing").error.unwrap().0;
    assert_eq!(missing.code, "CHILD_WORKFLOW_INVALID");
    assert!(missing.message.contains("nowhere"), "{}", missing.message);

    // `deep` → recurse → recurse … : the child that would be nested deeper than the bound fails
    // its step, and each level above fails with its child.
    let nested: i64 =
        sqlx::query_scalar("SELECT count(*) FROM workflow_runs WHERE name = 'recurse'").fetch_one(&pool).await.unwrap();
    assert_eq!(nested, i64::from(MAX_CHILD_DEPTH), "as deep as the bound, and no deeper");
    let deepest: Value = sqlx::query_scalar(
        "SELECT s.error FROM steps s JOIN workflow_runs r ON r.id = s.run_id \
         WHERE r.name = 'recurse' AND s.error->>'code' = 'CHILD_DEPTH_EXCEEDED'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(deepest["message"].as_str().unwrap().contains("at most 8"), "{deepest}");
    assert_eq!(step("deep").error.unwrap().0.code, "CHILD_WORKFLOW_FAILED");

    // A retry of the failed step makes a new child, keyed by the new attempt.
    let bad_id = step("bad").id;
    assert!(store.retry_step(bad_id).await.unwrap() > 0, "the step comes back");
    run_until(&stack, holds(&pool, "SELECT status <> 'running' FROM workflow_runs WHERE id = $1", parent)).await;
    let keys: Vec<String> = sqlx::query_scalar(
        "SELECT idempotency_key FROM workflow_runs WHERE parent_step_id = $1 ORDER BY parent_attempt",
    )
    .bind(bad_id)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(keys, [format!("child:{bad_id}:1"), format!("child:{bad_id}:2")]);
}
