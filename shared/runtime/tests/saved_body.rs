//! `http.request` with `save_body` (docs/src/guide/http-request.md) on LocalStack's S3: a 12 MiB
//! body is streamed into the artifact store as the attempt's artifact, the step's output holds
//! its descriptor (not the body), the next step reads it through `$artifact`, and the object's
//! sha256 is the digest recorded. Without an artifact store the step fails, retryable.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use rara_runtime::executor::BatchExecutor;
use rara_store::Store;
use serde_json::{Value, json};
use sqlx::PgPool;

const LIMIT: Duration = Duration::from_secs(90);
const BYTES: usize = 12 * 1024 * 1024;

/// The body the server answers: `BYTES` bytes of a repeating pattern.
fn body() -> Vec<u8> {
    (0..BYTES).map(|i| (i % 251) as u8).collect()
}

/// A server on 127.0.0.1 answering `/data` with [`body`]; its URL.
async fn server() -> String {
    let app = axum::Router::new()
        .route("/data", axum::routing::get(|| async { ([("content-type", "application/octet-stream")], body()) }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/data?token=s3cr3t-in-query")
}

fn flow(url: &str) -> String {
    format!(
        "name: saved\nsteps:\n  - {{name: fetch, operation: http.request, max_attempts: 1, input: {{url: '{url}', save_body: data.bin}}}}\n  \
         - {{name: use, operation: test.echo, depends_on: [fetch], input: {{file: {{$artifact: fetch, name: data.bin}}}}}}\n"
    )
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_saved_body_is_streamed_to_the_store_and_reaches_the_next_step(pool: PgPool) {
    let (artifacts, uri) = rara_testkit::s3_store("rara").await;
    let store = Store::new(pool);
    let queues = Queues::new(30, 10).await;
    let extra = [("RARA_ARTIFACTS_URI", uri.as_str()), ("RARA_HTTP_ALLOW_CIDRS", "127.0.0.1/32")];
    let settings = Arc::new(settings(&queues, &extra));
    let echo = Echo::default();
    let mut registry = rara_runtime::registry::standard_registry(&settings).await.unwrap();
    registry.register("test.echo", echo.clone()).unwrap();
    let queue = queues.queue();
    let executor = BatchExecutor::new(store.clone(), queue.clone(), Arc::new(registry), &settings)
        .with_artifacts(artifacts.clone(), &settings);
    let stack = Stack { store: store.clone(), queue, settings, executor };

    let run_id = submit(&store, &stack.settings, &flow(&server().await)).await;
    let (status, _) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "succeeded");
    let run = store.run(run_id).await.unwrap();
    let fetch = run.steps.iter().find(|s| s.name == "fetch").unwrap();
    let output = fetch.output.clone().unwrap();
    assert!(output.get("body").is_none(), "the body is not returned: {output}");
    assert_eq!((output["status"].clone(), output["truncated"].clone()), (json!(200), json!(false)));
    let artifact = &output["artifact"];
    assert_eq!(artifact["size_bytes"], json!(BYTES));
    assert_eq!(artifact["media_type"], "application/octet-stream");
    assert_eq!(fetch.artifacts.len(), 1, "recorded as the attempt's artifact");
    assert_eq!(fetch.artifacts[0].uri, artifact["uri"].as_str().unwrap());

    let digest = artifact["digest"].as_str().unwrap();
    let key = artifacts.location().key_of(artifact["uri"].as_str().unwrap()).unwrap();
    assert!(key.is_of_run(run_id));
    let object = artifacts.read_verified(&key, Some(digest), 16 << 20).await.unwrap();
    assert_eq!(object, body(), "the object is the body, whole");

    let calls = echo.0.lock().unwrap().clone();
    let file: &Value = &calls[0]["file"];
    assert_eq!((file["uri"].clone(), file["digest"].clone()), (artifact["uri"].clone(), json!(digest)));
    let shown = serde_json::to_string(&run).unwrap();
    assert!(!shown.contains("s3cr3t-in-query"), "the URL's query is never recorded");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn without_an_artifact_store_a_saved_body_fails_retryably(pool: PgPool) {
    let store = Store::new(pool);
    let queues = Queues::new(30, 10).await;
    let stack =
        Stack::new(store.clone(), &queues, settings(&queues, &[("RARA_HTTP_ALLOW_CIDRS", "127.0.0.1/32")])).await;
    let yaml = flow(&server().await)
        .replace("test.echo", "noop")
        .replace(", input: {file: {$artifact: fetch, name: data.bin}}", "");
    let run_id = submit(&store, &stack.settings, &yaml).await;
    let (status, _) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "failed");
    let fetch = store.run(run_id).await.unwrap().steps.remove(0);
    let error = fetch.error.unwrap().0;
    assert_eq!((error.code.as_str(), error.retryable), ("ARTIFACT_STORE_UNAVAILABLE", true), "{error:?}");
    assert!(error.message.contains("RARA_ARTIFACTS_URI"), "{}", error.message);
    assert!(!error.message.contains("s3cr3t"), "{}", error.message);
}
