//! Large outputs by reference (a claim check), end to end on Postgres, LocalStack's SQS and
//! LocalStack's S3: a 5 MiB output is written to the artifact store and the step's row keeps a
//! reference under 1 KiB; a dependent's `$output` references with pointers get the right
//! values, one to the whole output gets the reference; an output that forges a reference is
//! escaped.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use rara_artifacts::ArtifactStore;
use rara_domain::StepError;
use rara_domain::executor::{ExecutionContext, Executor};
use rara_domain::stored::Descriptor;
use rara_runtime::executor::BatchExecutor;
use rara_store::Store;
use serde_json::{Value, json};
use sqlx::PgPool;

const LIMIT: Duration = Duration::from_secs(120);
const ROWS: usize = 5 * 1024;

/// `test.big`: about 5 MiB of JSON: `ROWS` rows of 1 KiB and a small `meta`.
struct Big;

fn big_output() -> Value {
    let rows: Vec<Value> = (0..ROWS).map(|i| json!({"i": i, "text": format!("{i:06}").repeat(170)})).collect();
    json!({"rows": rows, "meta": {"count": ROWS, "label": "big"}})
}

#[async_trait::async_trait]
impl Executor for Big {
    async fn execute(&self, _: ExecutionContext, input: Value) -> Result<Value, StepError> {
        Ok(if input["forge"] == json!(true) {
            json!({"$stored": {"uri": "s3://elsewhere/secret", "size_bytes": 1, "digest": "sha256:00"}})
        } else {
            big_output()
        })
    }
}

const FLOW: &str = "name: large
steps:
  - {name: big, operation: test.big}
  - {name: forged, operation: test.big, input: {forge: true}}
  - name: use
    operation: test.echo
    depends_on: [big, forged]
    input:
      count: {$output: big, pointer: /meta/count}
      row: {$output: big, pointer: /rows/4321/i}
      whole: {$output: big}
      forged: {$output: forged, pointer: /$$stored/uri}
";

async fn stack(pool: PgPool) -> (Store, Stack, Echo, Arc<dyn ArtifactStore>) {
    let (artifacts, uri) = rara_testkit::s3_store("rara").await;
    let store = Store::new(pool);
    let queues = Queues::new(30, 10).await;
    let extra = [("RARA_ARTIFACTS_URI", uri.as_str()), ("RARA_MAX_OUTPUT_BYTES", "8388608")];
    let settings = Arc::new(settings(&queues, &extra));
    assert_eq!(settings.inline_output_bytes, 64 * 1024, "the default inline bound");
    let echo = Echo::default();
    let mut registry = rara_runtime::registry::standard_registry(&settings).await.unwrap();
    registry.register("test.big", Big).unwrap().register("test.echo", echo.clone()).unwrap();
    let queue = queues.queue();
    let executor = BatchExecutor::new(store.clone(), queue.clone(), Arc::new(registry), &settings)
        .with_artifacts(artifacts.clone(), &settings);
    (store.clone(), Stack { store, queue, settings, executor }, echo, artifacts)
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_5_mib_output_is_stored_by_reference_and_pointers_into_it_resolve(pool: PgPool) {
    let (store, stack, echo, artifacts) = stack(pool).await;
    let run_id = submit(&store, &stack.settings, FLOW).await;
    let (status, _) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "succeeded");

    let run = store.run(run_id).await.unwrap();
    let big = run.steps.iter().find(|s| s.name == "big").unwrap();
    let reference = big.output.clone().unwrap();
    let descriptor = Descriptor::of(&reference).expect("the output is a $stored reference");
    let expected = big_output();
    assert_eq!(descriptor.size_bytes, serde_json::to_vec(&expected).unwrap().len() as u64);
    assert!(descriptor.size_bytes > 5 * 1024 * 1024, "{}", descriptor.size_bytes);
    assert_eq!(descriptor.media_type.as_deref(), Some("application/json"));
    // The steps row stays small.
    let row_bytes: i32 = sqlx::query_scalar("SELECT pg_column_size(s.*) FROM steps s WHERE id = $1")
        .bind(big.id)
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert!(row_bytes < 1024, "the steps row is {row_bytes} bytes");
    // The object holds the output, under its digest.
    let key = artifacts.location().key_of(&descriptor.uri).unwrap();
    assert!(key.is_of_run(run_id), "{}", descriptor.uri);
    let object = artifacts.read_verified(&key, Some(&descriptor.digest), 8 << 20).await.unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&object).unwrap(), expected);

    // The dependent got the values at the pointers, and the reference for the whole output; the
    // forged reference was escaped when it was recorded, and is a plain value.
    let calls = echo.0.lock().unwrap().clone();
    assert_eq!(calls, [json!({"count": ROWS, "row": 4321, "whole": reference, "forged": "s3://elsewhere/secret"})]);
    let forged = run.steps.iter().find(|s| s.name == "forged").unwrap();
    assert!(forged.output.as_ref().unwrap().get("$$stored").is_some(), "{:?}", forged.output);
}

/// A rerun carries a step with an offloaded output over: a pointer into it from a step that
/// runs again reads the object under the original run's prefix (where it was made).
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_pointer_into_a_carried_offloaded_output_resolves_in_the_rerun(pool: PgPool) {
    let (store, stack, echo, _artifacts) = stack(pool).await;
    let (_, rerun) = failed_then_rerun(&store, &stack).await;
    assert_eq!(rerun.carried, ["big"]);
    assert_eq!(stack.run_until_finished(rerun.run_id, LIMIT).await.0, "succeeded");
    assert_eq!(echo.0.lock().unwrap().clone(), [json!({"row": 7})], "read from the original's object");
}

/// Pruning the original of a rerun that carries its offloaded output deletes nothing the rerun
/// reads: the original (its rows and its objects) stays while the rerun does, and goes, objects
/// and all, in the batch after the rerun's.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_prune_keeps_the_original_of_a_rerun_that_carries_its_offloaded_output(pool: PgPool) {
    use rara_runtime::pruned_objects::delete_pruned;
    use rara_store::retention::Prune;
    let (store, stack, echo, artifacts) = stack(pool).await;
    let (original, rerun) = failed_then_rerun(&store, &stack).await;
    assert_eq!(rerun.carried, ["big"]);
    let objects = |run| {
        let artifacts = artifacts.clone();
        async move { artifacts.list(&rara_artifacts::Key::run(run), 1000).await.unwrap().len() }
    };
    assert_eq!(objects(original).await, 1, "the original's offloaded output");

    // The original is finished, the rerun not yet: the prune leaves the original alone.
    assert_eq!(store.prunable(Duration::ZERO).await.unwrap().runs, 0, "the dry run agrees");
    let pruned = store.prune_queueing(Duration::ZERO, 100, Prune::Delete, true).await.unwrap();
    assert_eq!(pruned.runs, 0, "the original stays while its rerun does");
    assert_eq!(delete_pruned(&store, &*artifacts, 100).await.unwrap().objects, 0);
    assert_eq!(objects(original).await, 1);
    assert_eq!(stack.run_until_finished(rerun.run_id, LIMIT).await.0, "succeeded");
    assert_eq!(echo.0.lock().unwrap().clone(), [json!({"row": 7})], "read from the original's object");

    // Both finished: the rerun goes in one batch, the original in the next, then their objects.
    assert_eq!(store.prunable(Duration::ZERO).await.unwrap().runs, 2);
    let batches: Vec<u64> = {
        let mut batches = Vec::new();
        for _ in 0..3 {
            batches.push(store.prune_queueing(Duration::ZERO, 100, Prune::Delete, true).await.unwrap().runs);
        }
        batches
    };
    assert_eq!(batches, [1, 1, 0]);
    let pass = delete_pruned(&store, &*artifacts, 100).await.unwrap();
    assert_eq!((pass.runs, pass.failed), (2, 0));
    assert_eq!(objects(original).await, 0, "the original's objects go with it");
}

/// A run whose `gate` fails after `big` offloaded its output, and its rerun from `gate` (which
/// carries `big`; `use` then reads a pointer into its output), not run yet.
async fn failed_then_rerun(store: &Store, stack: &Stack) -> (uuid::Uuid, rara_store::rerun::Rerun) {
    let flow = "name: carried\ninputs: {fail: {type: integer}}\nsteps:\n  - {name: big, operation: test.big}\n  \
                - {name: gate, operation: fail, depends_on: [big], max_attempts: 1, input: {fail_attempts: {$input: /fail}, retryable: false}}\n  \
                - {name: use, operation: test.echo, depends_on: [gate], input: {row: {$output: big, pointer: /rows/7/i}}}\n";
    let inputs = json!({"fail": 1}).as_object().cloned().unwrap();
    let definition =
        rara_domain::workflow::WorkflowDefinition::parse(flow, rara_domain::workflow::Format::Yaml).unwrap();
    let plan = definition.plan_for(&stack.settings.core, &inputs, |_, _| true).unwrap();
    let original = store.submit(&plan).await.unwrap().run_id;
    assert_eq!(stack.run_until_finished(original, LIMIT).await.0, "failed");

    let fixed = json!({"fail": 0}).as_object().cloned().unwrap();
    let request = rara_store::rerun::RerunRequest {
        from: Some("gate".into()),
        idempotency_key: None,
        inputs: fixed,
        force: false,
        version: None,
    };
    (original, store.rerun(original, &request).await.unwrap())
}
