//! End to end with the real Python executor (`executors/python`, a subprocess per test) on
//! Postgres + LocalStack's SQS, through the local scheduler and executor runners: remote
//! steps with progress and artifacts, cancellation of a running remote step, a server
//! killed mid-step, a pinned version nobody offers, and a server that is down at start.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use rara_domain::StepError;
use rara_domain::state::{AttemptOutcome, StepStatus};
use rara_remote::pb;
use rara_remote::pb::executor_service_client::ExecutorServiceClient;
use rara_store::Store;
use rara_store::read::{ArtifactView, RunView, StepView};
use rara_testkit::python::PythonServer;
use rara_testkit::{LatePeer, eventually, eventually_within};
use serde_json::{Value, json};
use sqlx::PgPool;
use sqlx::types::Json;
use tokio::time::Instant;
use uuid::Uuid;

const LIMIT: Duration = Duration::from_secs(60);

async fn stack_for(store: &Store, queues: &Queues, endpoint: &str) -> Stack {
    Stack::new(store.clone(), queues, settings(queues, &[("RARA_REMOTE_EXECUTORS", endpoint)])).await
}

fn step<'a>(run: &'a RunView, name: &str) -> &'a StepView {
    run.steps.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no step {name}"))
}

async fn progress_recorded(store: &Store, step_id: Uuid) -> bool {
    sqlx::query_scalar("SELECT progress IS NOT NULL FROM steps WHERE id = $1")
        .bind(step_id)
        .fetch_one(store.pool())
        .await
        .unwrap()
}

fn sha256_hex(path: &Path) -> String {
    let out = std::process::Command::new("sha256sum").arg(path).output().expect("sha256sum runs");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().split_whitespace().next().unwrap().to_owned()
}

/// The artifact's file, checked against its recorded size and digest.
fn artifact_bytes(artifact: &ArtifactView, under: &Path) -> Vec<u8> {
    let path = Path::new(artifact.uri.strip_prefix("file://").expect("a file:// URI"));
    assert!(path.starts_with(under), "{path:?} is in the server's artifacts directory");
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("artifact {path:?} exists: {e}"));
    assert_eq!(artifact.size_bytes, Some(bytes.len() as i64), "{}", artifact.name);
    assert_eq!(artifact.digest, Some(format!("sha256:{}", sha256_hex(path))), "{}", artifact.name);
    bytes
}

/// The step's recorded progress: (fraction, message).
fn progress_of(step: &StepView) -> (f64, &str) {
    let progress = step.progress.as_ref().unwrap_or_else(|| panic!("{} recorded no progress", step.name));
    (progress.fraction, progress.message.as_str())
}

fn error_code(error: Option<&Json<StepError>>) -> (&str, bool) {
    let error = error.expect("an error is recorded");
    (error.code.as_str(), error.retryable)
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn text_stats_and_dataset_split_on_the_python_executor_succeed_with_progress_and_artifacts(pool: PgPool) {
    let server = PythonServer::start();
    let store = Store::new(pool);
    let queues = Queues::new(30, 10).await;
    let stack = stack_for(&store, &queues, server.url()).await;
    let text = (1..=30).map(|i| format!("the quick fox {i}")).collect::<Vec<_>>().join("\n");
    let rows: Vec<Value> = (0..20).map(|id| json!({"id": id})).collect();
    let definition = json!({"name": "remote", "steps": [
        {"name": "stats", "operation": "text.stats", "input": {"text": text, "top": 2}},
        {"name": "split", "operation": "dataset.split", "depends_on": ["stats"],
         "input": {"rows": rows, "ratios": {"train": 0.75, "test": 0.25}, "seed": 7}},
    ]});
    let run_id = submit(&store, &stack.settings, &definition.to_string()).await;

    let (status, counters) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "succeeded");
    assert_eq!((counters.succeeded, counters.retried, counters.failed), (2, 0, 0));
    let run = store.run(run_id).await.unwrap();

    let stats = step(&run, "stats");
    assert_eq!((stats.status, stats.attempt), (StepStatus::Succeeded, 1));
    assert_eq!(stats.attempts[0].capability_version.as_deref(), Some("1.0.0"), "the version that ran, recorded");
    let output = stats.output.as_ref().unwrap();
    assert_eq!((output["lines"].as_u64(), output["words"].as_u64()), (Some(30), Some(120)));
    assert_eq!(progress_of(stats), (1.0, "counted 30/30 lines"));
    let [artifact] = stats.artifacts.as_slice() else { panic!("one artifact: {:?}", stats.artifacts) };
    assert_eq!((artifact.name.as_str(), artifact.attempt), ("stats.json", 1));
    assert_eq!(artifact.media_type.as_deref(), Some("application/json"));
    let content: Value = serde_json::from_slice(&artifact_bytes(artifact, &server.artifacts_dir())).unwrap();
    assert_eq!(&content, output, "the artifact holds the output");

    let split = step(&run, "split");
    assert_eq!((split.status, split.attempt), (StepStatus::Succeeded, 1));
    assert_eq!(split.output.as_ref().unwrap()["counts"], json!({"train": 15, "test": 5}));
    // Splits are written in the order of the input's keys (serde_json sorts them): test, train.
    assert_eq!(progress_of(split), (1.0, "train: 15/15 rows"));
    let names: Vec<&str> = split.artifacts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["test.jsonl", "train.jsonl"]);
    let mut ids = Vec::new();
    for (artifact, count) in split.artifacts.iter().zip([5, 15]) {
        let bytes = artifact_bytes(artifact, &server.artifacts_dir());
        let lines: Vec<Value> =
            String::from_utf8(bytes).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), count, "{}", artifact.name);
        ids.extend(lines.iter().map(|row| row["id"].as_u64().unwrap()));
    }
    ids.sort_unstable();
    assert_eq!(ids, (0..20).collect::<Vec<u64>>(), "the splits partition the rows");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn cancelling_a_running_remote_step_stops_it_on_the_python_side_within_a_heartbeat(pool: PgPool) {
    let server = PythonServer::start();
    let store = Store::new(pool);
    let queues = Queues::new(30, 10).await;
    let stack = stack_for(&store, &queues, server.url()).await;
    let run_id = submit(
        &store,
        &stack.settings,
        "name: nap\nsteps:\n  - {name: nap, operation: sleep, version: \"1.0.0\", input: {seconds: 30}}\n",
    )
    .await;
    let step_id = store.run(run_id).await.unwrap().steps[0].id;

    let cancel = async {
        eventually("the Python sleep reports progress", || progress_recorded(&store, step_id)).await;
        assert!(store.cancel_step(step_id, "an operator cancelled it").await.unwrap());
        Instant::now()
    };
    let started = Instant::now();
    let ((status, counters), cancelled_at) = tokio::join!(stack.run_until_finished(run_id, LIMIT), cancel);
    let stopped_after = cancelled_at.elapsed();
    eprintln!("cancel to executor stopped: {stopped_after:?}; whole run: {:?}", started.elapsed());

    assert_eq!(status, "cancelled");
    assert!(stopped_after < Duration::from_secs(8), "stopped {stopped_after:?} after the cancel");
    assert!(started.elapsed() < Duration::from_secs(20), "well before the 30 s sleep: {:?}", started.elapsed());
    assert_eq!((counters.lease_lost, counters.succeeded, counters.failed), (1, 0, 0), "{counters:?}");
    let run = store.run(run_id).await.unwrap();
    let nap = &run.steps[0];
    assert_eq!((nap.status, nap.attempt), (StepStatus::Cancelled, 1));
    assert_eq!(error_code(nap.error.as_ref()), ("CANCELLED", false));
    assert_eq!(nap.attempts.iter().map(|a| a.outcome).collect::<Vec<_>>(), [AttemptOutcome::Cancelled]);

    // The Python side was told to stop, with the operator's reason, while its attempt still
    // ran (Cancel goes out before the stream is let go), and the attempt has ended: Python
    // forgets one only when its task is done, and it never succeeded.
    let told =
        format!("cancel step={step_id} attempt=1 found=True reason='the step was cancelled: an operator cancelled it'");
    assert!(server.wait_for_log(&told, Duration::from_secs(5)), "no {told:?} in the log:\n{}", server.log());
    let mut client = ExecutorServiceClient::new(rara_remote::router::lazy_channel(server.url()).unwrap());
    // The attempt's secret, as rara (no RARA_REMOTE_ATTEMPT_KEY here) derives it.
    let attempt_secret = rara_remote::Security::default().attempt_secret(step_id, 1);
    let probe = pb::CancelRequest { step_id: step_id.to_string(), attempt: 1, reason: "probe".into(), attempt_secret };
    assert!(!client.cancel(probe).await.unwrap().into_inner().found, "the Python attempt still runs");
    assert!(!server.log().contains(&format!("succeeded step={step_id}")), "{}", server.log());
}

/// An operator's cancel reaches a remote attempt that records no progress at once, through the
/// cancel `NOTIFY` its holder listens for, not at the next heartbeat: heartbeats here come every
/// 20 s and progress is recorded at most once a minute (only `sleep`'s first report is), so
/// nothing else would find the lost lease for 20 s.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn an_operators_cancel_reaches_a_quiet_remote_step_before_the_next_heartbeat(pool: PgPool) {
    const HEARTBEAT: Duration = Duration::from_secs(20);
    let server = PythonServer::start();
    let store = Store::new(pool);
    let queues = Queues::new(60, 10).await;
    let extra = [
        ("RARA_REMOTE_EXECUTORS", server.url()),
        ("RARA_HEARTBEAT_SECONDS", "20"),
        ("RARA_LEASE_SECONDS", "60"),
        ("RARA_VISIBILITY_TIMEOUT_SECONDS", "60"),
        ("RARA_FUNCTION_TIMEOUT_SECONDS", "60"),
        ("RARA_PROGRESS_INTERVAL_MS", "60000"),
    ];
    let stack = Stack::new(store.clone(), &queues, settings(&queues, &extra)).await;
    let run_id = submit(
        &store,
        &stack.settings,
        "name: quiet\nsteps:\n  - {name: quiet, operation: sleep, version: \"1.0.0\", timeout_seconds: 50, input: {seconds: 40}}\n",
    )
    .await;
    let step_id = store.run(run_id).await.unwrap().steps[0].id;
    let told =
        format!("cancel step={step_id} attempt=1 found=True reason='the step was cancelled: an operator cancelled it'");

    let started = Instant::now();
    let cancel = async {
        // Claimed and running: its first (and only recorded) progress is in.
        eventually("the Python sleep reports progress", || progress_recorded(&store, step_id)).await;
        assert!(store.cancel_step(step_id, "an operator cancelled it").await.unwrap());
        let cancelled_at = Instant::now();
        let heard_at = eventually_within(&format!("{told:?} is in the log"), HEARTBEAT, || async {
            let log = server.log();
            if log.contains(&told) { Ok(Instant::now()) } else { Err(log) }
        })
        .await;
        (cancelled_at, heard_at)
    };
    let ((status, counters), (cancelled_at, heard_at)) = tokio::join!(stack.run_until_finished(run_id, LIMIT), cancel);
    eprintln!("operator cancel to the executor's Cancel: {:?}", heard_at - cancelled_at);
    // Before the first heartbeat could have found it: that comes 20 s after the claim, which
    // came after `started`.
    assert!(heard_at < started + HEARTBEAT, "Cancel came {:?} after the cancel", heard_at - cancelled_at);
    assert_eq!(status, "cancelled");
    assert_eq!((counters.lease_lost, counters.succeeded, counters.failed), (1, 0, 0), "{counters:?}");
}

/// The endpoint is a [`LatePeer`] in front of the server. The restarted server (its Python
/// start paid by a standby, its port its own) takes over the endpoint before the first one is
/// killed: attempt 2 finds it listening whatever delay the retry's jitter drew.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_python_server_killed_mid_step_gives_a_retry_that_succeeds_on_a_restarted_server(pool: PgPool) {
    let mut server = PythonServer::start();
    let standby = PythonServer::standby(0);
    let peer = LatePeer::refusing(server.addr()).await;
    peer.listen();
    let store = Store::new(pool);
    let queues = Queues::new(30, 10).await;
    let stack = stack_for(&store, &queues, &peer.url()).await;
    let run_id = submit(
        &store,
        &stack.settings,
        "name: killed\nsteps:\n  - name: nap\n    operation: sleep\n    version: \"1.0.0\"\n    input: {seconds: 5}\n    max_attempts: 2\n    retry: {initial_delay_seconds: 1, max_delay_seconds: 1, multiplier: 1}\n",
    )
    .await;
    let step_id = store.run(run_id).await.unwrap().steps[0].id;

    let kill_and_restart = async {
        eventually("the Python sleep reports progress", || progress_recorded(&store, step_id)).await;
        let restarted = standby.listen().await;
        peer.forward_to(restarted.addr());
        server.kill();
        restarted
    };
    let ((status, counters), restarted) = tokio::join!(stack.run_until_finished(run_id, LIMIT), kill_and_restart);

    assert_eq!(status, "succeeded");
    assert_eq!((counters.retried, counters.succeeded), (1, 1), "{counters:?}");
    let nap = store.run(run_id).await.unwrap().steps.remove(0);
    assert_eq!((nap.status, nap.attempt), (StepStatus::Succeeded, 2));
    let [first, second] = nap.attempts.as_slice() else { panic!("two attempts: {:?}", nap.attempts) };
    assert_eq!(first.outcome, AttemptOutcome::Retrying);
    assert_eq!(error_code(first.error.as_ref()), ("EXECUTOR_UNAVAILABLE", true));
    assert_eq!(second.outcome, AttemptOutcome::Succeeded);
    assert!(second.fence > first.fence);
    assert_eq!(nap.output, Some(json!({"slept_seconds": 5.0, "cancelled": false})));
    let ran = format!("execute operation=sleep step={step_id} attempt=2");
    assert!(restarted.log().contains(&ran), "attempt 2 ran on the restarted server:\n{}", restarted.log());
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_pinned_version_no_server_offers_is_retried_then_fails_and_an_unknown_operation_fails_at_once(pool: PgPool) {
    let server = PythonServer::start();
    let store = Store::new(pool);
    let queues = Queues::new(30, 10).await;
    let stack = stack_for(&store, &queues, server.url()).await;
    let run_id = submit(
        &store,
        &stack.settings,
        "name: pinned\nsteps:\n  - {name: stats, operation: text.stats, version: \"9.9.9\", input: {text: hi}, max_attempts: 2, retry: {initial_delay_seconds: 0.2, max_delay_seconds: 0.2}}\n  - {name: nowhere, operation: no.such.operation, max_attempts: 3}\n",
    )
    .await;

    let (status, _) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "failed");
    let run = store.run(run_id).await.unwrap();
    // text.stats exists at other versions: 9.9.9 may be deploying, so the step is retried.
    let stats = &run.steps[0];
    assert_eq!((stats.status, stats.attempt), (StepStatus::Failed, 2), "retried, then out of attempts");
    assert_eq!(error_code(stats.error.as_ref()), ("VERSION_UNAVAILABLE", true));
    let message = stats.error.as_ref().unwrap().message.as_str();
    assert!(message.contains("\"text.stats\" at version \"9.9.9\""), "{message}");
    // An operation offered nowhere fails for good at once.
    let nowhere = &run.steps[1];
    assert_eq!((nowhere.status, nowhere.attempt), (StepStatus::Failed, 1), "not retried");
    assert_eq!(error_code(nowhere.error.as_ref()), ("UNKNOWN_OPERATION", false));
    assert!(!server.log().contains("execute operation=text.stats"), "nothing was sent to Python");
}

/// The executor is down at start: a [`LatePeer`] owns the endpoint's port from the start (no
/// other process can take it) and refuses connections until told to listen, then forwards to
/// a Python server already running on a port of its own. It is told to listen as soon as
/// attempt 1's connection was refused, whatever delay the retry's jitter drew: attempt 2
/// connects only after attempt 1 has been recorded, which takes longer than waking this task.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_remote_executor_down_at_start_is_retried_and_succeeds_once_it_listens(pool: PgPool) {
    let server = PythonServer::start();
    let peer = LatePeer::refusing(server.addr()).await;
    let endpoint = peer.url();
    let store = Store::new(pool);
    let queues = Queues::new(30, 10).await;
    // Discovery during init finds nothing listening.
    let stack = stack_for(&store, &queues, &endpoint).await;
    let refused_at_init = peer.refused();
    let run_id = submit(
        &store,
        &stack.settings,
        "name: late\nsteps:\n  - name: stats\n    operation: text.stats\n    input: {text: \"a b\\nc\"}\n    max_attempts: 3\n    retry: {initial_delay_seconds: 1, max_delay_seconds: 1, multiplier: 1}\n",
    )
    .await;
    let step_id = store.run(run_id).await.unwrap().steps[0].id;

    let start_late = async {
        // Attempt 1 routes: its discovery of the endpoint is refused.
        peer.refused_more_than(refused_at_init).await;
        peer.listen();
    };
    let ((status, counters), ()) = tokio::join!(stack.run_until_finished(run_id, LIMIT), start_late);

    assert_eq!(status, "succeeded");
    assert_eq!((counters.retried, counters.succeeded, counters.failed), (1, 1, 0), "{counters:?}");
    let stats = store.run(run_id).await.unwrap().steps.remove(0);
    assert_eq!((stats.status, stats.attempt), (StepStatus::Succeeded, 2));
    let [first, second] = stats.attempts.as_slice() else { panic!("two attempts: {:?}", stats.attempts) };
    assert_eq!(first.outcome, AttemptOutcome::Retrying);
    assert_eq!(error_code(first.error.as_ref()), ("EXECUTOR_UNAVAILABLE", true));
    let message = first.error.as_ref().unwrap().message.as_str();
    assert!(message.contains(&endpoint) && message.contains("\"text.stats\""), "{message}");
    assert_eq!(second.outcome, AttemptOutcome::Succeeded);
    assert_eq!(stats.output.as_ref().unwrap()["words"], 3);
    assert!(server.log().contains(&format!("execute operation=text.stats step={step_id} attempt=2")));
}

/// The article of the data-flow test: three paragraphs.
const ARTICLE: &str = "the fox runs\nthe fox jumps\n\nthe dog sleeps\n\n\nthe end of the fox\n";

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn an_article_fetched_split_mapped_and_merged_gives_the_run_its_outputs(pool: PgPool) {
    // A local web server with the article: `http.request` (in process) fetches it.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/article.txt", listener.local_addr().unwrap());
    let app = axum::Router::new().route("/article.txt", axum::routing::get(|| async { ARTICLE }));
    tokio::spawn(async move { axum::serve(listener, app).await });

    let server = PythonServer::start();
    let store = Store::new(pool);
    let queues = Queues::new(30, 10).await;
    // The article's server is on loopback, which the egress policy opens only when told.
    let extra = [("RARA_REMOTE_EXECUTORS", server.url()), ("RARA_HTTP_ALLOW_CIDRS", "127.0.0.1/32")];
    let stack = Stack::new(store.clone(), &queues, settings(&queues, &extra)).await;
    let definition = json!({"name": "flow",
    "output": {"words": {"$output": "merge", "pointer": "/words"},
                "top": {"$output": "merge", "pointer": "/top_words/0"}},
    "steps": [
        {"name": "fetch", "operation": "http.request", "input": {"url": url}},
        {"name": "split", "operation": "text.split", "depends_on": ["fetch"],
         "input": {"text": {"$output": "fetch", "pointer": "/body"}}},
        {"name": "stats", "operation": "text.stats", "depends_on": ["split"],
         "for_each": {"$output": "split", "pointer": "/parts"}, "max_concurrency": 2,
         "input": {"text": {"$item": "/text"}, "top": 5}},
        {"name": "merge", "operation": "stats.merge", "depends_on": ["stats"],
         "input": {"stats": {"$output": "stats"}, "top": 1}},
    ]});
    let run_id = submit(&store, &stack.settings, &definition.to_string()).await;
    let (status, _) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "succeeded");
    let run = store.run(run_id).await.unwrap();

    // One Python child per paragraph, each with its own artifact, gathered in order.
    let children: Vec<&StepView> = run.steps.iter().filter(|s| s.parent.as_deref() == Some("stats")).collect();
    let words: Vec<u64> = children.iter().map(|c| c.output.as_ref().unwrap()["words"].as_u64().unwrap()).collect();
    assert_eq!(words, [6, 3, 5], "the paragraphs, in order");
    assert!(
        children.iter().all(|c| c.artifacts.len() == 1 && c.attempts[0].capability_version.as_deref() == Some("1.0.0"))
    );
    let stats = step(&run, "stats").output.as_ref().unwrap();
    assert_eq!(stats.as_array().map(Vec::len), Some(3));
    let merged = step(&run, "merge").output.as_ref().unwrap();
    assert_eq!((merged["parts"].as_u64(), merged["words"].as_u64()), (Some(3), Some(14)));
    assert_eq!(run.output, Some(json!({"words": 14, "top": {"word": "the", "count": 5}})));
}
