//! Fan-out end to end (DESIGN.md "Data flow", map steps), on Postgres + LocalStack's SQS
//! through the local scheduler and executor runners: a step with `for_each` runs once per
//! element of a dependency's output or of a run input, at most `max_concurrency` at once; the
//! steps that depend on it get its children's outputs as one list, in element order; a child
//! that fails fails its map and skips what had not started; a child's context has its index.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;
use rara_domain::StepError;
use rara_domain::executor::{ExecutionContext, Executor};
use rara_domain::step_error::codes;
use rara_runtime::executor::BatchExecutor;
use rara_store::Store;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

const LIMIT: Duration = Duration::from_secs(120);
const SECRET: &str = "s3cr3t-f4n-0ut";

/// `test.index`: returns its input's `n`, its map index and its run id from the context.
struct Index;

#[async_trait::async_trait]
impl Executor for Index {
    async fn execute(&self, ctx: ExecutionContext, input: Value) -> Result<Value, StepError> {
        Ok(json!({"n": input["n"], "index": ctx.map_index, "run": ctx.run_id}))
    }
}

/// A stack whose registry also has `test.echo`, and whose secrets come from [`Vault`].
async fn stack(pool: PgPool) -> (Store, Stack, Echo) {
    let store = Store::new(pool);
    let queues = Queues::new(30, 10).await;
    let settings = Arc::new(settings(&queues, &[]));
    let echo = Echo::default();
    let mut registry = rara_runtime::registry::standard_registry(&settings).await.unwrap();
    registry.register("test.echo", echo.clone()).unwrap().register("test.index", Index).unwrap();
    let queue = queues.queue();
    let executor = BatchExecutor::new(store.clone(), queue.clone(), Arc::new(registry), &settings)
        .with_secrets(Arc::new(Vault(SECRET)));
    store.grant_secret("api", "*", "test.echo", None).await.unwrap();
    (store.clone(), Stack { store, queue, settings, executor }, echo)
}

/// The children of `map` in `run`, by index: (name, status, input, output).
async fn children(store: &Store, run: Uuid, map: &str) -> Vec<(String, String, Value, Option<Value>)> {
    sqlx::query_as(
        "SELECT c.name, c.status::text, c.input, c.output FROM steps c JOIN steps m ON m.id = c.parent_id
         WHERE m.run_id = $1 AND m.name = $2 ORDER BY c.map_index",
    )
    .bind(run)
    .bind(map)
    .fetch_all(store.pool())
    .await
    .unwrap()
}

/// The run's step counters: (total, unfinished, failed).
async fn counters(store: &Store, run: Uuid) -> (i32, i32, i32) {
    sqlx::query_as("SELECT steps_total, steps_unfinished, steps_failed FROM workflow_runs WHERE id = $1")
        .bind(run)
        .fetch_one(store.pool())
        .await
        .unwrap()
}

async fn step_row(store: &Store, run: Uuid, name: &str) -> (String, Option<Value>, Option<Value>) {
    sqlx::query_as("SELECT status::text, output, error FROM steps WHERE run_id = $1 AND name = $2")
        .bind(run)
        .bind(name)
        .fetch_one(store.pool())
        .await
        .unwrap()
}

const FAN: &str = "name: fan
inputs: {suffix: {type: string, default: '!'}}
steps:
  - {name: split, operation: test.echo, input: {parts: [{t: a}, {t: b}, {t: c}]}}
  - name: each
    operation: test.echo
    depends_on: [split]
    for_each: {$output: split, pointer: /parts}
    input: {text: {$item: /t}, whole: {$item: ''}, suffix: {$input: /suffix}, key: {$secret: api}}
  - {name: merge, operation: test.echo, depends_on: [each], input: {all: {$output: each}}}
";

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_map_runs_once_per_element_and_its_dependents_get_the_outputs_in_order(pool: PgPool) {
    let (store, stack, echo) = stack(pool).await;
    let run_id = submit(&store, &stack.settings, FAN).await;
    let (status, _) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "succeeded");

    // One child per element, named `each[i]`, whose input is the template substituted whole:
    // `$item` by its element, `$input` by the run input, the template's own `$secret` kept for
    // the execution to resolve.
    let kids = children(&store, run_id, "each").await;
    let names: Vec<&str> = kids.iter().map(|k| k.0.as_str()).collect();
    assert_eq!(names, ["each[0]", "each[1]", "each[2]"]);
    assert!(kids.iter().all(|k| k.1 == "succeeded"), "{kids:?}");
    assert_eq!(kids[1].2, json!({"text": "b", "whole": {"t": "b"}, "suffix": "!", "key": {"$secret": "api"}}));
    // The children ran with the secret resolved.
    let calls = echo.0.lock().unwrap().clone();
    let child_calls: Vec<&Value> = calls.iter().filter(|c| c.get("whole").is_some()).collect();
    assert_eq!(child_calls.len(), 3);
    assert!(child_calls.iter().all(|c| c["key"] == json!(SECRET)));

    // The map step's output is the children's outputs in element order (redacted like any
    // output), and the dependent got it whole.
    let outputs: Vec<Value> = kids.iter().map(|k| k.3.clone().unwrap()).collect();
    let (map_status, map_output, _) = step_row(&store, run_id, "each").await;
    assert_eq!(map_status, "succeeded");
    assert_eq!(map_output, Some(Value::Array(outputs.clone())));
    assert_eq!(outputs[0]["key"], json!("***"), "outputs are redacted");
    assert_eq!(outputs.iter().map(|o| o["text"].clone()).collect::<Vec<_>>(), [json!("a"), json!("b"), json!("c")]);
    let merge = calls.iter().find(|c| c.get("all").is_some()).expect("merge ran");
    assert_eq!(merge["all"], Value::Array(outputs));

    // The run counts its children among its steps.
    let (total, unfinished, _) = counters(&store, run_id).await;
    assert_eq!((total, unfinished), (6, 0));
    // Every step of the run, the children included, has its name in `step_names` (migration
    // 000017), through which the reads by run find it.
    let named: Vec<String> = sqlx::query_scalar(
        "SELECT n.name FROM step_names n JOIN steps s ON s.id = n.step_id AND s.run_id = n.run_id AND s.name = n.name
         WHERE n.run_id = $1 ORDER BY n.name",
    )
    .bind(run_id)
    .fetch_all(store.pool())
    .await
    .unwrap();
    assert_eq!(named.len(), 6, "{named:?}");
    assert!(["each[0]", "each[1]", "each[2]"].iter().all(|c| named.iter().any(|n| n == c)), "{named:?}");
    // The map step's history: the attempt that expanded it, then the one that gathered.
    let outcomes: Vec<String> = sqlx::query_scalar(
        "SELECT a.outcome::text FROM step_attempts a JOIN steps s ON s.id = a.step_id
         WHERE s.run_id = $1 AND s.name = 'each' ORDER BY a.attempt",
    )
    .bind(run_id)
    .fetch_all(store.pool())
    .await
    .unwrap();
    assert_eq!(outcomes, ["succeeded", "succeeded"]);
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
async fn max_concurrency_bounds_how_many_children_run_at_once(pool: PgPool) {
    let (store, stack, _) = stack(pool).await;
    let run_id = submit(
        &store,
        &stack.settings,
        "name: bounded\ninputs: {waits: {type: array, default: [0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3]}}\nsteps:\n  - {name: nap, operation: sleep, for_each: {$input: /waits}, max_concurrency: 2, input: {seconds: {$item: ''}}}\n",
    )
    .await;
    let (status, _) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "succeeded");
    let spans: Vec<(DateTime<Utc>, DateTime<Utc>)> = sqlx::query_as(
        "SELECT a.started_at, a.finished_at FROM step_attempts a JOIN steps s ON s.id = a.step_id
         WHERE s.run_id = $1 AND s.parent_id IS NOT NULL",
    )
    .bind(run_id)
    .fetch_all(store.pool())
    .await
    .unwrap();
    assert_eq!(spans.len(), 7);
    // At every start, how many attempts were running (itself included).
    let most = spans.iter().map(|(start, _)| spans.iter().filter(|(s, f)| s <= start && start < f).count()).max();
    assert!(most <= Some(2), "at most 2 children run at once; {most:?} did: {spans:?}");
    let (_, output, _) = step_row(&store, run_id, "nap").await;
    assert_eq!(output.unwrap().as_array().map(Vec::len), Some(7));
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_child_that_fails_fails_its_map_and_skips_what_had_not_started_and_a_retry_of_the_map_finishes_it(
    pool: PgPool,
) {
    let (store, stack, _) = stack(pool).await;
    let run_id = submit(
        &store,
        &stack.settings,
        "name: broken\ninputs: {plan: {type: array, default: [0, 1, 0, 0, 0]}}\nsteps:\n  - {name: each, operation: fail, for_each: {$input: /plan}, max_concurrency: 1, input: {fail_attempts: {$item: ''}, retryable: false}}\n  - {name: after, operation: noop, depends_on: [each]}\n",
    )
    .await;
    let (status, _) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "failed");
    let statuses: Vec<String> = children(&store, run_id, "each").await.into_iter().map(|k| k.1).collect();
    assert_eq!(statuses, ["succeeded", "failed", "skipped", "skipped", "skipped"]);
    let (map_status, _, error) = step_row(&store, run_id, "each").await;
    assert_eq!(map_status, "failed");
    let error = error.unwrap();
    assert_eq!((error["code"].as_str(), error["retryable"].as_bool()), (Some(codes::MAP_CHILD_FAILED), Some(false)));
    assert_eq!(step_row(&store, run_id, "after").await.0, "skipped");
    let (total, unfinished, failed) = counters(&store, run_id).await;
    assert_eq!((total, unfinished, failed), (7, 0, 2), "the failed child and its map");

    // A child is retried through its map step, which brings back every child that did not
    // succeed (`each[1]` succeeds on its second attempt) and the dependents it had skipped.
    let ids: Vec<(String, Uuid)> = sqlx::query_as("SELECT name, id FROM steps WHERE run_id = $1")
        .bind(run_id)
        .fetch_all(store.pool())
        .await
        .unwrap();
    let id = |name: &str| ids.iter().find(|(n, _)| n == name).unwrap().1;
    let refused = store.retry_step(id("each[1]")).await;
    assert!(matches!(&refused, Err(rara_store::Error::MapChild { map, .. }) if map == "each"), "{refused:?}");
    assert_eq!(store.retry_step(id("each")).await.unwrap(), 6, "the map, four children and after");
    let (status, _) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "succeeded");
    assert_eq!(step_row(&store, run_id, "each").await.1.unwrap().as_array().map(Vec::len), Some(5));
    assert_eq!(step_row(&store, run_id, "after").await.0, "succeeded");
    let (total, unfinished, failed) = counters(&store, run_id).await;
    assert_eq!((total, unfinished, failed), (7, 0, 0));
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn an_empty_list_succeeds_with_no_children_and_a_list_that_is_not_one_fails_for_good(pool: PgPool) {
    let (store, stack, echo) = stack(pool).await;
    let empty = submit(
        &store,
        &stack.settings,
        "name: empty\ninputs: {items: {type: array, default: []}}\nsteps:\n  - {name: each, operation: test.echo, for_each: {$input: /items}}\n",
    )
    .await;
    let (status, _) = stack.run_until_finished(empty, LIMIT).await;
    assert_eq!(status, "succeeded");
    assert!(children(&store, empty, "each").await.is_empty());
    assert_eq!(step_row(&store, empty, "each").await.1, Some(json!([])));

    let not_a_list = submit(
        &store,
        &stack.settings,
        "name: odd\nsteps:\n  - {name: split, operation: test.echo, input: {parts: 'a b c'}}\n  - {name: each, operation: test.echo, depends_on: [split], max_attempts: 3, for_each: {$output: split, pointer: /parts}}\n",
    )
    .await;
    let (status, _) = stack.run_until_finished(not_a_list, LIMIT).await;
    assert_eq!(status, "failed");
    assert!(children(&store, not_a_list, "each").await.is_empty());
    let (map_status, _, error) = step_row(&store, not_a_list, "each").await;
    assert_eq!(map_status, "failed");
    let error = error.unwrap();
    assert_eq!((error["code"].as_str(), error["retryable"].as_bool()), (Some(codes::INVALID_INPUT), Some(false)));
    assert_eq!(error["message"], json!("for_each found a string, not a list"));
    assert_eq!(echo.0.lock().unwrap().len(), 1, "only split ran");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_thousand_children_run_and_gather(pool: PgPool) {
    let (store, stack, _) = stack(pool).await;
    let items: Vec<u32> = (0..1000).collect();
    let yaml = format!(
        "name: wide\ninputs: {{items: {{type: array, default: {}}}}}\nsteps:\n  - {{name: each, operation: test.index, for_each: {{$input: /items}}, input: {{n: {{$item: ''}}}}}}\n",
        serde_json::to_string(&items).unwrap()
    );
    let run_id = submit(&store, &stack.settings, &yaml).await;
    let (status, _) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "succeeded");
    let output = step_row(&store, run_id, "each").await.1.unwrap();
    let outputs = output.as_array().unwrap();
    let got: Vec<u64> = outputs.iter().map(|o| o["n"].as_u64().unwrap()).collect();
    assert_eq!(got, (0..1000).collect::<Vec<u64>>(), "every child's output, in element order");
    // Each child's context says which element it is, and of which run.
    assert!(outputs.iter().all(|o| o["index"] == o["n"] && o["run"] == json!(run_id)), "{:?}", &outputs[..3]);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_map_that_tolerates_failures_succeeds_with_null_in_their_places_and_fails_past_them(pool: PgPool) {
    let (store, stack, _) = stack(pool).await;
    let workflow = |tolerated: u32| {
        format!(
            "name: tolerant\ninputs: {{plan: {{type: array, default: [0, 1, 0, 1, 0]}}}}\nsteps:\n  - {{name: each, operation: fail, for_each: {{$input: /plan}}, max_concurrency: 2, tolerated_failures: {tolerated}, input: {{fail_attempts: {{$item: ''}}, retryable: false}}}}\n  - {{name: after, operation: noop, depends_on: [each]}}\n"
        )
    };

    // Two failures tolerated: the map succeeds, null where a failed child's output would be.
    let run_id = submit(&store, &stack.settings, &workflow(2)).await;
    let (status, _) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "succeeded");
    let statuses: Vec<String> = children(&store, run_id, "each").await.into_iter().map(|k| k.1).collect();
    assert_eq!(statuses, ["succeeded", "failed", "succeeded", "failed", "succeeded"]);
    let output = step_row(&store, run_id, "each").await.1.unwrap();
    let nulls: Vec<bool> = output.as_array().unwrap().iter().map(Value::is_null).collect();
    assert_eq!(nulls, [false, true, false, true, false]);
    assert_eq!(step_row(&store, run_id, "after").await.0, "succeeded");
    let (_, unfinished, failed) = counters(&store, run_id).await;
    assert_eq!((unfinished, failed), (0, 0), "a tolerated failure does not fail the run");

    // One tolerated: the second failure fails the map, and the run.
    let run_id = submit(&store, &stack.settings, &workflow(1)).await;
    let (status, _) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "failed");
    let (map_status, _, error) = step_row(&store, run_id, "each").await;
    assert_eq!((map_status.as_str(), error.unwrap()["code"].as_str()), ("failed", Some(codes::MAP_CHILD_FAILED)));
    assert_eq!(step_row(&store, run_id, "after").await.0, "skipped");
    let (_, unfinished, failed) = counters(&store, run_id).await;
    assert_eq!((unfinished, failed), (0, 2), "the second failed child and the map; the first was tolerated");
}
