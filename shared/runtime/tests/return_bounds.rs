//! Nothing a step returns can exceed its bound or take its siblings down, on Postgres +
//! LocalStack's SQS through the local runners, with a real `rara.v1` server on 127.0.0.1:0:
//! a 4 MiB remote output, a remote `retry_after_seconds: 1e300` and a verdict that panics,
//! each inside a packed message of ten; a progress flood at fraction 1.0 (writes counted in the
//! database); a map gathering more than `RARA_MAX_GATHERED_BYTES`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use rara_domain::StepError;
use rara_domain::executor::{ExecutionContext, Executor};
use rara_domain::step_error::codes;
use rara_remote::pb;
use rara_remote::pb::execute_response::Event;
use rara_remote::pb::executor_service_server::{ExecutorService, ExecutorServiceServer};
use rara_runtime::executor::BatchExecutor;
use rara_store::Store;
use rara_store::read::RunView;
use serde_json::{Value, json};
use sqlx::PgPool;
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status};
use uuid::Uuid;

const LIMIT: Duration = Duration::from_secs(90);
const MIB: usize = 1024 * 1024;
/// How long the flood lasts.
const FLOOD: Duration = Duration::from_secs(3);

/// A `rara.v1` server whose operations misbehave on purpose.
#[derive(Clone, Copy)]
struct Hostile;

fn event(sequence: u64, event: Event) -> Result<pb::ExecuteResponse, Status> {
    Ok(pb::ExecuteResponse { sequence, timestamp: None, event: Some(event) })
}

fn succeeded(output_json: String) -> Event {
    Event::Succeeded(pb::Succeeded { output_json, artifacts: vec![] })
}

/// The events after `accepted` and `running` of `operation` (numbered from 3).
async fn play(operation: &str, tx: &mpsc::Sender<Result<pb::ExecuteResponse, Status>>) {
    let end = match operation {
        "remote.big" => succeeded(format!(r#"{{"blob":"{}"}}"#, "x".repeat(4 * MIB))),
        "remote.slow_down" => {
            let details = HashMap::from([("retry_after_seconds".to_owned(), "1e300".to_owned())]);
            let error = pb::Error { code: "SLOW_DOWN".into(), message: "later".into(), retryable: true, details };
            Event::Failed(pb::Failed { error: Some(error) })
        }
        "remote.flood" => {
            let message = "p".repeat(MIB);
            let until = tokio::time::Instant::now() + FLOOD;
            let mut sequence = 3;
            while tokio::time::Instant::now() < until {
                let progress = Event::Progress(pb::Progress { fraction: 1.0, message: message.clone() });
                if tx.send(event(sequence, progress)).await.is_err() {
                    return;
                }
                sequence += 1;
            }
            let _ = tx.send(event(sequence, succeeded(r#"{"flooded":true}"#.into()))).await;
            return;
        }
        _ => succeeded(r#"{"ok":true}"#.into()),
    };
    let _ = tx.send(event(3, end)).await;
}

#[tonic::async_trait]
impl ExecutorService for Hostile {
    async fn get_capabilities(
        &self,
        _: Request<pb::GetCapabilitiesRequest>,
    ) -> Result<Response<pb::GetCapabilitiesResponse>, Status> {
        let capabilities = ["remote.big", "remote.slow_down", "remote.flood", "remote.ok"]
            .map(|name| pb::Capability { name: name.into(), version: "1.0.0".into(), ..Default::default() })
            .to_vec();
        Ok(Response::new(pb::GetCapabilitiesResponse { capabilities }))
    }

    type ExecuteStream = ReceiverStream<Result<pb::ExecuteResponse, Status>>;

    async fn execute(&self, request: Request<pb::ExecuteRequest>) -> Result<Response<Self::ExecuteStream>, Status> {
        let operation = request.into_inner().operation;
        let (tx, rx) = mpsc::channel(4);
        tokio::spawn(async move {
            let _ = tx.send(event(1, Event::Accepted(pb::Accepted {}))).await;
            let _ = tx.send(event(2, Event::Running(pb::Running::default()))).await;
            play(&operation, &tx).await;
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn cancel(&self, _: Request<pb::CancelRequest>) -> Result<Response<pb::CancelResponse>, Status> {
        Ok(Response::new(pb::CancelResponse { found: true }))
    }

    type AttachStream = ReceiverStream<Result<pb::ExecuteResponse, Status>>;

    async fn attach(&self, _: Request<pb::AttachRequest>) -> Result<Response<Self::AttachStream>, Status> {
        Err(Status::unimplemented("nothing detaches here"))
    }
}

async fn start_hostile() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(ExecutorServiceServer::new(Hostile))
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    url
}

/// `test.pad`: returns 64 KiB.
struct Pad;

#[async_trait::async_trait]
impl Executor for Pad {
    async fn execute(&self, _: ExecutionContext, _: Value) -> Result<Value, StepError> {
        Ok(json!({"pad": "x".repeat(64 * 1024)}))
    }
}

/// `test.hostile`: fails with a `retry_after_seconds` of 1e300, which the retry decision
/// converted with a panicking `Duration::from_secs_f64` before it was clamped.
struct HostileDetails;

#[async_trait::async_trait]
impl Executor for HostileDetails {
    async fn execute(&self, _: ExecutionContext, _: Value) -> Result<Value, StepError> {
        Err(StepError::retryable("SLOW_DOWN", "later").with_details(json!({"retry_after_seconds": 1e300})))
    }
}

/// A stack with the hostile server as its remote executor, `test.pad`, `test.hostile` and
/// `test.echo` in process, ten steps per message, and `extra` settings.
async fn stack(pool: PgPool, extra: &[(&str, &str)]) -> (Store, Stack) {
    let url = start_hostile().await;
    let store = Store::new(pool);
    let queues = Queues::new(30, 10).await;
    let mut vars = vec![("RARA_REMOTE_EXECUTORS", url.as_str()), ("RARA_STEPS_PER_MESSAGE", "10")];
    vars.extend_from_slice(extra);
    let settings = Arc::new(settings(&queues, &vars));
    let mut registry = rara_runtime::registry::standard_registry(&settings).await.unwrap();
    registry
        .register("test.pad", Pad)
        .unwrap()
        .register("test.hostile", HostileDetails)
        .unwrap()
        .register("test.echo", Echo::default())
        .unwrap();
    let queue = queues.queue();
    let executor = BatchExecutor::new(store.clone(), queue.clone(), Arc::new(registry), &settings);
    (store.clone(), Stack { store, queue, settings, executor })
}

/// A workflow of `odd` and nine siblings running `sibling`.
fn ten(odd: &str, sibling: &str) -> String {
    let mut yaml = format!("name: ten\nsteps:\n  - {{name: odd, operation: {odd}, max_attempts: 3}}\n");
    for i in 0..9 {
        yaml.push_str(&format!("  - {{name: s{i}, operation: {sibling}}}\n"));
    }
    yaml
}

/// Leases the ten steps in one round: one message names all of them.
async fn lease_in_one_message(stack: &Stack) {
    let counters = stack.scheduler().pass().await.unwrap();
    assert_eq!((counters.leased, counters.sent), (10, 10), "{counters:?}");
}

fn assert_siblings_succeeded_once(run: &RunView) {
    for sibling in run.steps.iter().filter(|s| s.name != "odd") {
        assert_eq!(sibling.status.to_string(), "succeeded", "{}", sibling.name);
        assert_eq!(sibling.attempts.len(), 1, "{} ran once", sibling.name);
    }
}

fn odd(run: &RunView) -> &rara_store::read::StepView {
    run.steps.iter().find(|s| s.name == "odd").unwrap()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_four_mib_remote_output_fails_for_good_and_its_nine_siblings_succeed_once(pool: PgPool) {
    let (store, stack) = stack(pool, &[]).await;
    let run_id = submit(&store, &stack.settings, &ten("remote.big", "remote.ok")).await;
    lease_in_one_message(&stack).await;

    let (status, counters) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "failed");
    assert_eq!((counters.succeeded, counters.failed, counters.panicked), (9, 1, 0), "{counters:?}");
    let run = store.run(run_id).await.unwrap();
    let big = odd(&run);
    let error = big.error.as_ref().unwrap();
    assert_eq!((error.code.as_str(), error.retryable, big.attempts.len()), (codes::OUTPUT_TOO_LARGE, false, 1));
    assert!(!error.message.contains("xxxx"), "never the value: {}", error.message);
    assert_siblings_succeeded_once(&run);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_remote_retry_after_of_1e300_is_clamped_and_its_nine_siblings_succeed_once(pool: PgPool) {
    let (store, stack) = stack(pool, &[]).await;
    let run_id = submit(&store, &stack.settings, &ten("remote.slow_down", "remote.ok")).await;
    lease_in_one_message(&stack).await;

    let counters = stack.drain(Duration::from_secs(3)).await;
    assert_eq!((counters.succeeded, counters.retried, counters.panicked), (9, 1, 0), "{counters:?}");
    let run = store.run(run_id).await.unwrap();
    let slow = odd(&run);
    assert_eq!((slow.status.to_string().as_str(), slow.attempts.len()), ("pending", 1));
    let attempt = &slow.attempts[0];
    let error = attempt.error.as_ref().unwrap();
    assert_eq!(error.details["retry_after_seconds"], json!(86_400.0), "clamped at entry, a number");
    let delay = (attempt.retry_at.unwrap() - attempt.finished_at.unwrap()).num_seconds();
    assert!((86_390..=86_410).contains(&delay), "retries after the clamped 24 h, not {delay} s");
    assert_siblings_succeeded_once(&run);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_verdict_that_would_panic_is_its_steps_alone_and_its_nine_siblings_succeed_once(pool: PgPool) {
    let (store, stack) = stack(pool, &[]).await;
    let run_id = submit(&store, &stack.settings, &ten("test.hostile", "test.echo")).await;
    lease_in_one_message(&stack).await;

    let counters = stack.drain(Duration::from_secs(3)).await;
    assert_eq!(counters.succeeded, 9, "{counters:?}");
    let run = store.run(run_id).await.unwrap();
    let hostile = odd(&run);
    // Before `rara_domain::retry` clamps, judging panics: EXECUTOR_PANICKED, retried (and
    // failed on the last attempt, which is not retried); after, the executor's own failure is
    // retried in 24 h. Either way it is this step's fate alone.
    assert_ne!(hostile.status.to_string(), "succeeded");
    let error = hostile.attempts[0].error.as_ref().unwrap();
    assert!(["SLOW_DOWN", codes::EXECUTOR_PANICKED].contains(&error.code.as_str()), "{error:?}");
    assert!(error.retryable);
    assert_siblings_succeeded_once(&run);
}

/// Counts every progress write of the test's database (a trigger on `steps.progress`).
async fn count_progress_writes(store: &Store) {
    for statement in [
        "CREATE TABLE progress_writes (step_id uuid NOT NULL, bytes int NOT NULL)",
        "CREATE FUNCTION count_progress() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
           INSERT INTO progress_writes VALUES (NEW.id, octet_length(NEW.progress::text)); RETURN NEW; END $$",
        "CREATE TRIGGER count_progress AFTER UPDATE OF progress ON steps FOR EACH ROW
           WHEN (NEW.progress IS NOT NULL) EXECUTE FUNCTION count_progress()",
    ] {
        sqlx::query(statement).execute(store.pool()).await.unwrap();
    }
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_progress_flood_at_fraction_one_writes_a_bounded_number_of_times(pool: PgPool) {
    // Test settings: RARA_PROGRESS_INTERVAL_MS=100.
    let (store, stack) = stack(pool, &[]).await;
    count_progress_writes(&store).await;
    let run_id = submit(&store, &stack.settings, &ten("remote.flood", "remote.ok")).await;
    lease_in_one_message(&stack).await;

    let (status, counters) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "succeeded");
    assert_eq!((counters.succeeded, counters.panicked), (10, 0), "{counters:?}");
    let run = store.run(run_id).await.unwrap();
    let flood = odd(&run);
    let (writes, largest): (i64, Option<i32>) =
        sqlx::query_as("SELECT count(*), max(bytes) FROM progress_writes WHERE step_id = $1")
            .bind(flood.id)
            .fetch_one(store.pool())
            .await
            .unwrap();
    // One per 100 ms of the flood, plus the first final one, plus slack for the edges.
    let bound = (FLOOD.as_millis() / 100) as i64 + 3;
    assert!((1..=bound).contains(&writes), "{writes} progress writes for a {FLOOD:?} flood (bound {bound})");
    assert!(largest.unwrap() <= 1100, "each message cut to 1 KiB: {largest:?}");
    assert_eq!(flood.attempts.len(), 1);
    assert_siblings_succeeded_once(&run);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_map_gathering_more_than_its_bound_fails_for_good_naming_the_total_and_the_bound(pool: PgPool) {
    let (store, stack) = stack(pool, &[("RARA_MAX_GATHERED_BYTES", "1048576")]).await;
    let items: Vec<u32> = (0..200).collect();
    let yaml = format!(
        "name: wide\ninputs: {{items: {{type: array, default: {items:?}}}}}\nsteps:\n  - {{name: each, operation: test.pad, for_each: {{$input: /items}}}}\n  - {{name: after, operation: test.echo, depends_on: [each], input: {{all: {{$output: each}}}}}}\n  - {{name: beside, operation: test.echo}}\n"
    );
    let run_id = submit(&store, &stack.settings, &yaml).await;

    let (status, _) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "failed");
    let run = store.run(run_id).await.unwrap();
    let map = run.steps.iter().find(|s| s.name == "each").unwrap();
    let error = map.error.as_ref().unwrap();
    assert_eq!((error.code.as_str(), error.retryable), (codes::OUTPUT_TOO_LARGE, false));
    assert_eq!((error.details["field"].as_str(), error.details["bound"].as_u64()), (Some("children"), Some(1_048_576)));
    assert!(error.details["bytes"].as_u64().unwrap() > 200 * 64 * 1024, "{:?}", error.details);
    assert!(map.output.is_none(), "nothing was gathered");
    let children: i64 = sqlx::query_scalar("SELECT count(*) FROM steps WHERE parent_id = $1 AND status = 'succeeded'")
        .bind(map.id)
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(children, 200);
    let status_of = |name: &str| run.steps.iter().find(|s| s.name == name).unwrap().status.to_string();
    assert_eq!(status_of("beside"), "succeeded", "a step beside it is unaffected");
    assert_ne!(status_of("after"), "succeeded", "the dependent never ran");
    let _: Uuid = run_id;
}
