//! Large run inputs by reference (a claim check), end to end on Postgres and LocalStack's SQS
//! and S3, as a user meets them: `rara ui`'s `POST /api/runs` takes a run with 5 MiB of inputs,
//! writes them to the artifact store and the run's row keeps a reference under 1 KiB; `rara dev`
//! runs the steps, whose `$input` pointers (a map's `for_each` among them) resolve against the
//! object and whose whole-inputs reference passes the reference on; the API and `rara status`
//! show the reference; the same idempotency key and inputs find the run (other inputs are a
//! conflict); a rerun keeps the
//! reference and resolves it; `rara prune` deletes the object.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use rara_artifacts::Key;
use serde_json::{Value, json};

const TOKEN: &str = "large-inputs-test-token";
const ROWS: usize = 5 * 1024;

const FLOW: &str = r#"name: large-inputs
inputs:
  doc: {type: object}
  label: {type: string}
  tags: {type: array}
steps:
  - name: pick
    operation: noop
    input: {row: {$input: /doc/rows/4321}, label: {$input: /label}, whole: {$input: ""}}
  - name: each
    operation: noop
    for_each: {$input: /tags}
    input: {tag: {$item: ""}, count: {$input: /doc/count}}
"#;

/// About 5 MiB of JSON that does not compress: `ROWS` rows of 1 KiB of hex.
fn big_doc() -> Value {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let rows: Vec<Value> = (0..ROWS)
        .map(|i| {
            let text: String = (0..64)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    format!("{state:016x}")
                })
                .collect();
            json!({"i": i, "text": text})
        })
        .collect();
    json!({"rows": rows, "count": ROWS})
}

/// A child process killed at the end of the test.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(args: &[&str], env: &[(&'static str, String)]) -> Running {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rara"));
    command.args(args).stdout(Stdio::null()).stderr(Stdio::null());
    for (k, v) in env {
        command.env(k, v);
    }
    Running(command.spawn().unwrap())
}

/// Waits for `condition` (polled every 200 ms) for at most `limit`.
async fn eventually<F: std::future::Future<Output = bool>>(what: &str, limit: Duration, condition: impl Fn() -> F) {
    let deadline = Instant::now() + limit;
    while !condition().await {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn five_mib_of_run_inputs_are_stored_by_reference_resolved_at_claim_and_pruned() {
    let db = ScratchDb::new();
    assert!(db.rara(&["migrate"]).status.success());
    let (artifacts, uri) = rara_testkit::s3_store("inputs").await;
    let queue = format!("{}inputs-{}", rara_platform::call_log::TEST_QUEUE_PREFIX, uuid::Uuid::new_v4().simple());
    let env = vec![
        ("DATABASE_URL", db.url.clone()),
        ("RARA_LOG", "warn".to_owned()),
        ("AWS_ENDPOINT_URL", rara_testkit::endpoint()),
        ("AWS_ACCESS_KEY_ID", "test".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
        ("AWS_REGION", "us-east-1".to_owned()),
        ("RARA_ARTIFACTS_URI", uri.clone()),
        ("RARA_MAX_INPUT_BYTES", (8 << 20).to_string()),
    ];
    let dev = spawn(&["dev", "--queue-name", &queue], &env);
    let port = rara_testkit::python::free_port();
    let base = format!("http://127.0.0.1:{port}");
    let _ui = spawn(&["ui", "--bind", &format!("127.0.0.1:{port}"), "--token", TOKEN], &env);
    let client = reqwest::Client::new();
    let (http, base) = (&client, base.as_str());
    eventually("rara ui answers", Duration::from_secs(30), || async move {
        http.get(format!("{base}/openapi.json")).send().await.is_ok()
    })
    .await;

    // Submitted through the API: the inputs go to the store, the run keeps a reference.
    let inputs = json!({"doc": big_doc(), "label": "big", "tags": ["a", "b"]});
    let size = serde_json::to_vec(&inputs).unwrap().len() as u64;
    assert!(size > 5 << 20, "{size}");
    let body = json!({"definition": FLOW, "inputs": inputs, "idempotency_key": "large-inputs-1"});
    let submit = || http.post(format!("{base}/api/runs")).bearer_auth(TOKEN).json(&body).send();
    let submitted = submit().await.unwrap();
    assert_eq!(submitted.status(), 201, "{}", submitted.text().await.unwrap());
    let run: uuid::Uuid = submitted.json::<Value>().await.unwrap()["id"].as_str().unwrap().parse().unwrap();
    let bytes = db.psql_rows(&format!("SELECT pg_column_size(inputs) FROM workflow_runs WHERE id = '{run}'"));
    assert!(bytes[0].parse::<u32>().unwrap() < 1024, "the runs row's inputs are {} bytes", bytes[0]);

    let view = || async move {
        http.get(format!("{base}/api/runs/{run}")).send().await.unwrap().json::<Value>().await.unwrap()
    };
    let reference = view().await["inputs"].clone();
    let stored = &reference["$stored"];
    assert_eq!(reference.as_object().map(|o| o.len()), Some(1), "{reference}");
    assert_eq!((stored["size_bytes"].as_u64(), stored["media_type"].as_str()), (Some(size), Some("application/json")));
    let key = artifacts.location().key_of(stored["uri"].as_str().unwrap()).unwrap();
    assert_eq!(key, Key::inputs(run));
    let digest = stored["digest"].as_str().unwrap();
    let object = artifacts.read_verified(&key, Some(digest), 8 << 20).await.unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&object).unwrap(), inputs, "the object holds the inputs");

    // The same key and inputs find the run (their digests agree) and leave no second object.
    let again = submit().await.unwrap();
    assert_eq!(again.status(), 200);
    assert_eq!(again.json::<Value>().await.unwrap()["id"], json!(run.to_string()));
    // The same key with other inputs (another digest) is a conflict, and leaves nothing.
    let mut other = body.clone();
    other["inputs"]["label"] = json!("other");
    let conflict = http.post(format!("{base}/api/runs")).bearer_auth(TOKEN).json(&other).send().await.unwrap();
    assert_eq!(conflict.status(), 409, "{}", conflict.text().await.unwrap());
    assert_eq!(artifacts.list(&Key::runs(), 100).await.unwrap(), [key], "one object in the store");

    // The steps ran with the values at their pointers, the whole inputs as the reference.
    eventually("the run ends", Duration::from_secs(120), || async move { view().await["status"] != "running" }).await;
    assert_eq!(view().await["status"], "succeeded");
    let rows = |sql: String| {
        db.psql_rows(&sql).iter().map(|row| serde_json::from_str::<Value>(row).unwrap()).collect::<Vec<_>>()
    };
    let picked = rows(format!(
        "SELECT a.input FROM step_attempts a JOIN steps s ON s.id = a.step_id WHERE s.run_id = '{run}' AND s.name = 'pick'"
    ));
    let row = json!({"i": 4321, "text": inputs["doc"]["rows"][4321]["text"]});
    assert_eq!(picked, [json!({"row": row, "label": "big", "whole": reference})]);
    let children =
        rows(format!("SELECT input FROM steps WHERE run_id = '{run}' AND parent_id IS NOT NULL ORDER BY map_index"));
    assert_eq!(children, [json!({"tag": "a", "count": ROWS}), json!({"tag": "b", "count": ROWS})]);

    // `rara status` shows the reference, never the values.
    let text = stdout(&db.rara_in(&env, &["status", &run.to_string()]));
    assert!(text.contains(&format!("inputs by reference: {size} bytes, {digest}")), "{text}");
    assert!(text.len() < 8 << 10, "{} bytes of status", text.len());

    // A rerun keeps the reference (the object lies under the original's prefix) and its
    // pointers resolve against it; replacing an input of inputs kept by reference is refused.
    let made = db.rara_in(&env, &["--json", "rerun", &run.to_string(), "--from", "pick"]);
    let rerun = serde_json::from_str::<Value>(&stdout(&made)).unwrap()["run_id"].as_str().unwrap().to_owned();
    let rerun_view = || {
        let rerun = rerun.clone();
        async move { http.get(format!("{base}/api/runs/{rerun}")).send().await.unwrap().json::<Value>().await.unwrap() }
    };
    eventually("the rerun ends", Duration::from_secs(120), || async move { rerun_view().await["status"] != "running" })
        .await;
    assert_eq!(rerun_view().await["status"], "succeeded");
    assert_eq!(rerun_view().await["inputs"], reference);
    let picked_again = rows(format!(
        "SELECT a.input FROM step_attempts a JOIN steps s ON s.id = a.step_id WHERE s.run_id = '{rerun}' AND s.name = 'pick'"
    ));
    assert_eq!(picked_again, picked);
    let refused = db.rara_in(&env, &["rerun", &run.to_string(), "--from", "pick", "--input", "label=other"]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("cannot replace one"), "{}", stderr(&refused));

    // Pruning the runs (the rerun, then its original) deletes the object. (`rara dev`'s
    // scheduler would delete queued runs' objects too: stopped, it leaves the count to the prune.)
    drop(dev);
    assert_eq!(artifacts.list(&Key::runs(), 100).await.unwrap(), [Key::inputs(run)], "before the prune");
    let pruned = db.rara_in(&env, &["--json", "prune", "--older-than", "0s"]);
    let report: Value = serde_json::from_str(&stdout(&pruned)).unwrap();
    assert_eq!(report["runs"], 2, "{report}");
    assert_eq!(report["objects"], json!({"runs": 2, "objects": 1, "failed": 0}), "{report}");
    assert_eq!(artifacts.list(&Key::runs(), 100).await.unwrap(), [], "the inputs' object is gone");
}
