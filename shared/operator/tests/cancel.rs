//! An operator's cancel and the bulk actions on a real Postgres, the detached attempts' executors
//! played by a `rara.v1` server of the test's own: a detached attempt is told at once, many are
//! told concurrently, and a bulk retry brings back what one retry per step would.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rara_domain::config::Config;
use rara_domain::workflow::{Format, Plan, WorkflowDefinition};
use rara_operator::{bulk, cancel};
use rara_remote::pb;
use rara_remote::pb::executor_service_server::{ExecutorService, ExecutorServiceServer};
use rara_store::Store;
use rara_store::browse::RunFilter;
use sqlx::PgPool;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status};
use uuid::Uuid;

/// A remote executor that answers every `Cancel` after `delay`, found, and remembers it.
#[derive(Debug, Clone, Default)]
struct Executor {
    delay: Duration,
    cancels: Arc<Mutex<Vec<pb::CancelRequest>>>,
}

#[tonic::async_trait]
impl ExecutorService for Executor {
    async fn get_capabilities(
        &self,
        _request: Request<pb::GetCapabilitiesRequest>,
    ) -> Result<Response<pb::GetCapabilitiesResponse>, Status> {
        Ok(Response::new(pb::GetCapabilitiesResponse { capabilities: Vec::new() }))
    }

    type ExecuteStream = ReceiverStream<Result<pb::ExecuteResponse, Status>>;

    async fn execute(&self, _request: Request<pb::ExecuteRequest>) -> Result<Response<Self::ExecuteStream>, Status> {
        Err(Status::unimplemented("this executor only hears cancels"))
    }

    async fn cancel(&self, request: Request<pb::CancelRequest>) -> Result<Response<pb::CancelResponse>, Status> {
        tokio::time::sleep(self.delay).await;
        self.cancels.lock().unwrap().push(request.into_inner());
        Ok(Response::new(pb::CancelResponse { found: true }))
    }

    type AttachStream = ReceiverStream<Result<pb::ExecuteResponse, Status>>;

    async fn attach(&self, _request: Request<pb::AttachRequest>) -> Result<Response<Self::AttachStream>, Status> {
        Err(Status::unimplemented("this executor only hears cancels"))
    }
}

/// Serves `executor` on 127.0.0.1:0 for the rest of the test: its endpoint.
async fn serve(executor: Executor) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(ExecutorServiceServer::new(executor))
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    format!("http://{addr}")
}

fn plan(yaml: &str) -> Plan {
    let config = Config::from_lookup("test", |_| None).expect("default config");
    WorkflowDefinition::parse(yaml, Format::Yaml).expect("parse").plan(&config).expect("plan")
}

/// The step `name` of `run`.
async fn step(pool: &PgPool, run: Uuid, name: &str) -> Uuid {
    sqlx::query_scalar("SELECT step_id FROM step_names WHERE run_id = $1 AND name = $2")
        .bind(run)
        .bind(name)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Parks `step` as a detached attempt on `endpoint` (what the executor's park leaves: leased,
/// its first attempt running remotely).
async fn park_on(pool: &PgPool, step: Uuid, endpoint: &str) {
    sqlx::query(
        "WITH s AS (UPDATE steps SET status = 'leased', attempt = 1, fence = nextval('rara_fence_seq'),
                    lease_token = gen_random_uuid(), leased_by = 'w', remote_endpoint = $2, remote_sequence = 0,
                    lease_expires_at = now() + interval '1 hour'
                    WHERE id = $1 RETURNING id, fence, lease_token)
         INSERT INTO step_attempts (step_id, attempt, fence, leased_by, lease_token, remote_endpoint)
         SELECT id, 1, fence, 'w', lease_token, $2 FROM s",
    )
    .bind(step)
    .bind(endpoint)
    .execute(pool)
    .await
    .unwrap();
}

async fn status(pool: &PgPool, step: Uuid) -> String {
    sqlx::query_scalar("SELECT status::text FROM steps WHERE id = $1").bind(step).fetch_one(pool).await.unwrap()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn cancelling_a_detached_step_reaches_the_remote_attempt_at_once(pool: PgPool) {
    let store = Store::new(pool.clone());
    let executor = Executor::default();
    let endpoint = serve(executor.clone()).await;
    let run = store.submit(&plan("name: one\nsteps:\n  - {name: train, operation: sleep}\n")).await.unwrap().run_id;
    let step_id = step(&pool, run, "train").await;
    park_on(&pool, step_id, &endpoint).await;

    let started = Instant::now();
    let done = cancel::cancel(&store, step_id, "no longer needed").await.unwrap();
    assert_eq!((done.kind, done.steps), ("step", 1));
    assert!(matches!(done.told[..], [(_, Ok(true))]), "the executor was told: {:?}", done.told);
    assert_eq!(status(&pool, step_id).await, "cancelled");
    let heard = executor.cancels.lock().unwrap().clone();
    assert_eq!(heard.len(), 1);
    assert_eq!((heard[0].step_id.as_str(), heard[0].attempt), (step_id.to_string().as_str(), 1));
    assert_eq!(heard[0].reason, "the step was cancelled: no longer needed", "the operator's reason");
    assert!(started.elapsed() < Duration::from_secs(2), "at once, not at the next re-attach");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_bulk_cancel_tells_the_detached_executors_concurrently(pool: PgPool) {
    let store = Store::new(pool.clone());
    let delay = Duration::from_millis(500);
    let executor = Executor { delay, ..Executor::default() };
    let endpoint = serve(executor.clone()).await;
    let attempts = 8;
    for _ in 0..attempts {
        let run = store.submit(&plan("name: parked\nsteps:\n  - {name: train, operation: sleep}\n")).await.unwrap();
        park_on(&pool, step(&pool, run.run_id, "train").await, &endpoint).await;
    }
    let filter = RunFilter { name: Some("parked".to_owned()), ..RunFilter::default() };

    let started = Instant::now();
    let done = bulk::cancel(&store, &filter, "maintenance", false).await.unwrap();
    let took = started.elapsed();
    assert_eq!((done.matched, done.changed), (attempts, attempts));
    assert_eq!(done.told.len(), attempts as usize);
    assert!(done.told.iter().all(|(_, told)| matches!(told, Ok(true))), "{:?}", done.told);
    assert_eq!(executor.cancels.lock().unwrap().len(), attempts as usize);
    // One after another would take `attempts` delays.
    assert!(took < delay * 3, "told concurrently: {took:?} for {attempts} executors answering in {delay:?}");
}

/// The steps of a run by name: (status, pending_deps, max_attempts), and the run's counters.
async fn state(pool: &PgPool, run: Uuid) -> (Vec<(String, String, i32, i32)>, (String, i32, i32, i32)) {
    let steps = sqlx::query_as(
        "SELECT name, status::text, pending_deps, max_attempts FROM steps WHERE run_id = $1 ORDER BY name",
    )
    .bind(run)
    .fetch_all(pool)
    .await
    .unwrap();
    let counters = sqlx::query_as(
        "SELECT status::text, steps_unfinished, steps_failed, steps_cancelled FROM workflow_runs WHERE id = $1",
    )
    .bind(run)
    .fetch_one(pool)
    .await
    .unwrap();
    (steps, counters)
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_bulk_retry_brings_back_what_one_retry_per_step_does(pool: PgPool) {
    let store = Store::new(pool.clone());
    let yaml = "name: chain\nsteps:\n  - {name: a, operation: noop}\n  - {name: b, operation: noop, depends_on: [a]}\n  \
                - {name: c, operation: noop, depends_on: [b]}\n  - {name: d, operation: noop}\n  - {name: e, operation: noop}\n";
    let runs = [store.submit(&plan(yaml)).await.unwrap().run_id, store.submit(&plan(yaml)).await.unwrap().run_id];
    for run in runs {
        // `a` cancelled (`b` and `c` skipped), `d` cancelled, `e` still pending.
        store.cancel_step(step(&pool, run, "a").await, "x").await.unwrap();
        store.cancel_step(step(&pool, run, "d").await, "x").await.unwrap();
    }
    let before = state(&pool, runs[0]).await;
    assert_eq!(before.1, ("running".to_owned(), 1, 0, 2), "{before:?}");

    for name in ["a", "d"] {
        assert!(store.retry_step(step(&pool, runs[1], name).await).await.unwrap() > 0);
    }
    let by_run = RunFilter::default();
    let retryable = store.retryable_steps(&by_run).await.unwrap();
    let first: Vec<Uuid> = vec![step(&pool, runs[0], "a").await, step(&pool, runs[0], "d").await];
    assert_eq!(retryable, first, "only the first run's are left");
    let done = bulk::retry(&store, &by_run, false).await.unwrap();
    assert_eq!((done.matched, done.changed), (2, 4), "a, b, c and d came back");
    assert_eq!(state(&pool, runs[0]).await, state(&pool, runs[1]).await);
    assert_eq!(state(&pool, runs[0]).await.1, ("running".to_owned(), 5, 0, 0));
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_bulk_retry_over_its_bound_is_refused_whole(pool: PgPool) {
    let store = Store::new(pool.clone());
    // Two runs (a workflow holds at most 10,000 steps) of one step more than half the bound.
    let half = bulk::MAX_STEPS / 2 + 1;
    let steps: String = (0..half).map(|i| format!("  - {{name: s{i}, operation: noop}}\n")).collect();
    for _ in 0..2 {
        let run = store.submit(&plan(&format!("name: wide\nsteps:\n{steps}"))).await.unwrap().run_id;
        store.cancel_run(run, "x").await.unwrap();
    }
    let over = 2 * half;
    let all = RunFilter::default();

    let dry = bulk::retry(&store, &all, true).await.unwrap();
    assert_eq!((dry.matched, dry.changed), (over as u64, 0));
    let refused = bulk::retry(&store, &all, false).await.unwrap_err();
    assert!(
        matches!(refused, bulk::Error::TooMany { matched, limit: bulk::MAX_STEPS, .. } if matched == over),
        "{refused:?}"
    );
    let cancelled: i64 =
        sqlx::query_scalar("SELECT count(*) FROM steps WHERE status = 'cancelled'").fetch_one(&pool).await.unwrap();
    assert_eq!(cancelled, over as i64, "nothing changed");
}
