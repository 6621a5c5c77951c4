//! Every outside call has a deadline: an SQS endpoint that accepts connections and never
//! answers (a [`SilentPeer`] in front of LocalStack) cannot wedge the scheduler or the
//! executor runner. On stop they end within the shutdown grace plus a few seconds, and
//! what they held is given back; when the peer speaks again, work resumes without a restart.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use rara_platform::runner::run_executor;
use rara_queue::Queue;
use rara_runtime::executor::BatchExecutor;
use rara_runtime::scheduler::Scheduler;
use rara_store::Store;
use sqlx::PgPool;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// The grace of these tests, and what stopping may take beyond it.
const GRACE_SECONDS: u64 = 1;
const BEYOND_GRACE: Duration = Duration::from_secs(5);

async fn step_row(store: &Store, run_id: Uuid) -> (String, Option<Uuid>, i32, i32) {
    sqlx::query_as("SELECT status::text, lease_token, attempt, max_attempts FROM steps WHERE run_id = $1")
        .bind(run_id)
        .fetch_one(store.pool())
        .await
        .unwrap()
}

/// A scheduler that reaches SQS through a silent peer, one noop step submitted, running
/// until its token is cancelled.
struct SilentScheduler {
    store: Store,
    queues: Queues,
    peer: SilentPeer,
    run_id: Uuid,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Result<rara_runtime::metrics::Counters, rara_runtime::scheduler::Error>>,
}

impl SilentScheduler {
    async fn start(pool: PgPool, extra: &[(&str, &str)]) -> SilentScheduler {
        let store = Store::new(pool);
        let queues = Queues::new(30, 10).await;
        let settings = Arc::new(settings(&queues, extra));
        let peer = SilentPeer::start(endpoint_addr(), true).await;
        let scheduler =
            Scheduler::new(store.clone(), queues.queue_through(&peer, &settings.timeouts).await, settings.clone());
        let run_id = submit(&store, &settings, "name: one\nsteps:\n  - {name: a, operation: noop}\n").await;
        let stop = CancellationToken::new();
        let task = tokio::spawn({
            let stop = stop.clone();
            async move { scheduler.run(None, stop).await }
        });
        SilentScheduler { store, queues, peer, run_id, stop, task }
    }
}

/// Submits one 60 s sleep and lets the scheduler send its message (through LocalStack).
async fn submit_long_step(store: &Store, stack: &Stack, max_attempts: u32) -> Uuid {
    let yaml = format!(
        "name: long\nsteps:\n  - {{name: a, operation: sleep, input: {{seconds: 60}}, timeout_seconds: 120, max_attempts: {max_attempts}}}\n"
    );
    let run_id = submit(store, &stack.settings, &yaml).await;
    assert_eq!(stack.scheduler().pass().await.unwrap().sent, 1);
    run_id
}

/// Runs `executor` over `queue` until the step of `run_id` is running; returns the stop
/// token and the runner.
async fn runner_with_a_running_step(
    store: &Store,
    stack: &Stack,
    executor: BatchExecutor,
    queue: Arc<dyn Queue>,
    run_id: Uuid,
) -> (CancellationToken, tokio::task::JoinHandle<Result<rara_runtime::metrics::Counters, rara_queue::Error>>) {
    let stop = CancellationToken::new();
    let options = stack.runner_options(None);
    let task = tokio::spawn({
        let stop = stop.clone();
        async move { run_executor(&executor, queue, &options, stop).await }
    });
    rara_testkit::eventually_within("the step is running", Duration::from_secs(15), || async {
        let status = step_row(store, run_id).await.0;
        if status == "running" { Ok(()) } else { Err(status) }
    })
    .await;
    // "running" is the claim's commit, which may not have reached the runner yet. The runner
    // starts listening for cancels only once an execution runs, so its `LISTEN` proves the
    // claim's answer arrived (the test then cuts the runner's peer knowing what it holds).
    rara_testkit::eventually_within("the runner listens for cancels", Duration::from_secs(15), || async {
        let listening: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'listen %'",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
        listening > 0
    })
    .await;
    (stop, task)
}

/// What `task` returned, which it must do within the grace plus [`BEYOND_GRACE`].
async fn within_grace<T, E: std::fmt::Debug>(task: tokio::task::JoinHandle<Result<T, E>>, what: &str) -> T {
    tokio::time::timeout(Duration::from_secs(GRACE_SECONDS) + BEYOND_GRACE, task)
        .await
        .unwrap_or_else(|_| panic!("{what} ends within grace + 5 s"))
        .unwrap()
        .unwrap()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_scheduler_facing_a_silent_sqs_stops_within_its_grace_and_releases_its_leases(pool: PgPool) {
    // SDK deadlines far beyond the grace: the stop must not wait for them.
    let s = SilentScheduler::start(
        pool,
        &[
            ("RARA_SHUTDOWN_GRACE_SECONDS", "1"),
            ("RARA_SQS_ATTEMPT_TIMEOUT_MS", "30000"),
            ("RARA_SQS_OPERATION_TIMEOUT_MS", "60000"),
        ],
    )
    .await;
    // The first pass leases the step and hangs on the send.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(step_row(&s.store, s.run_id).await.0, "leased", "leased, its message stuck in the silent peer");
    s.stop.cancel();
    let stopped = Instant::now();
    let counters = within_grace(s.task, "the scheduler").await;
    eprintln!("stopped {:?} after SIGTERM", stopped.elapsed());
    assert_eq!((counters.leased, counters.sent, counters.released), (1, 0, 1));
    let (status, token, _, _) = step_row(&s.store, s.run_id).await;
    assert_eq!((status.as_str(), token), ("pending", None), "the lease was given back at once");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_scheduler_resumes_sending_when_a_silent_sqs_speaks_again(pool: PgPool) {
    let s = SilentScheduler::start(
        pool,
        &[
            ("RARA_SQS_CONNECT_TIMEOUT_MS", "500"),
            ("RARA_SQS_ATTEMPT_TIMEOUT_MS", "700"),
            ("RARA_SQS_OPERATION_TIMEOUT_MS", "1500"),
            ("RARA_SCHEDULER_POLL_MS", "200"),
        ],
    )
    .await;
    // While the peer is silent, every send times out and its lease is released.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(s.queues.queue().receive(1, Duration::from_secs(1)).await.unwrap().is_empty());
    s.peer.set_silent(false);
    let received = s.queues.queue().receive(1, Duration::from_secs(15)).await.unwrap();
    assert_eq!(received.len(), 1, "the same scheduler sent the step once SQS answered again");
    s.stop.cancel();
    let counters = s.task.await.unwrap().unwrap();
    assert!(counters.released >= 1 && counters.sent == 1, "{counters:?}");
    let (status, token, _, _) = step_row(&s.store, s.run_id).await;
    assert_eq!(status, "leased");
    let message = rara_queue::StepMessage::parse(&received[0].body).unwrap();
    assert_eq!(token, Some(message.lease_token), "the message carries the step's current lease");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn an_executor_runner_stopped_while_sqs_is_silent_gives_its_running_step_back(pool: PgPool) {
    let (store, queues, stack) = Stack::fresh(
        pool,
        &[
            ("RARA_SHUTDOWN_GRACE_SECONDS", "1"),
            ("RARA_SQS_ATTEMPT_TIMEOUT_MS", "30000"),
            ("RARA_SQS_OPERATION_TIMEOUT_MS", "60000"),
        ],
    )
    .await;
    let run_id = submit_long_step(&store, &stack, 2).await;
    let peer = SilentPeer::start(endpoint_addr(), false).await;
    let queue: Arc<dyn Queue> = queues.queue_through(&peer, &stack.settings.timeouts).await;
    let registry = Arc::new(rara_runtime::registry::standard_registry(&stack.settings).await.unwrap());
    let executor = BatchExecutor::new(store.clone(), queue.clone(), registry, &stack.settings);
    let (stop, task) = runner_with_a_running_step(&store, &stack, executor, queue, run_id).await;
    peer.set_silent(true);
    stop.cancel();
    let counters = within_grace(task, "the runner").await;
    assert_eq!((counters.claimed, counters.released), (1, 1), "{counters:?}");

    let (status, token, attempt, max_attempts) = step_row(&store, run_id).await;
    assert_eq!((status.as_str(), token), ("pending", None), "due again for another executor");
    assert_eq!((attempt, max_attempts), (1, 3), "the interrupted attempt does not count against the budget");
    let closed: (String, String) = sqlx::query_as(
        "SELECT a.outcome::text, a.error->>'code' FROM step_attempts a JOIN steps s ON s.id = a.step_id WHERE s.run_id = $1",
    )
    .bind(run_id)
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert_eq!(closed, ("retrying".to_owned(), "EXECUTOR_SHUTDOWN".to_owned()));
}

/// Drops every report (the stream under test is the point, not what it reports).
struct NoReports;

#[async_trait::async_trait]
impl rara_domain::executor::Reporter for NoReports {
    async fn progress(&self, _: f64, _: &str) -> Result<(), rara_domain::executor::ReportError> {
        Ok(())
    }
    async fn artifact(&self, _: rara_domain::executor::Artifact) -> Result<(), rara_domain::executor::ReportError> {
        Ok(())
    }
}

#[tokio::test]
async fn a_remote_executor_that_goes_silent_mid_step_is_a_retryable_failure_within_its_keepalive() {
    use rara_domain::registry::RemoteRouter;
    let server = PythonServer::start();
    let upstream: std::net::SocketAddr = server.url().trim_start_matches("http://").parse().unwrap();
    let peer = SilentPeer::start(upstream, false).await;
    let transport = rara_remote::Transport {
        connect_timeout: Duration::from_secs(1),
        keepalive_interval: Duration::from_millis(500),
        keepalive_timeout: Duration::from_millis(500),
        ..rara_remote::Transport::default()
    };
    let remote = rara_remote::RemoteExecutors::with_transport([peer.url()], transport).unwrap();
    remote.refresh().await;
    let executor = remote.route("sleep", None).await.unwrap().expect("the Python executor offers sleep");
    let ctx = rara_domain::executor::ExecutionContext {
        run_id: Uuid::new_v4(),
        step_id: Uuid::new_v4(),
        map_index: None,
        operation: "sleep".into(),
        version: None,
        attempt: 1,
        fence: 1,
        deadline: Instant::now() + Duration::from_secs(60),
        cancel: CancellationToken::new(),
        stop_reason: Default::default(),
        reporter: Arc::new(NoReports),
        detach: Default::default(),
    };
    let task = tokio::spawn(async move { executor.execute(ctx, serde_json::json!({"seconds": 30})).await });
    tokio::time::sleep(Duration::from_secs(1)).await;
    peer.set_silent(true);
    let silent = Instant::now();
    let error = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the silent peer is found out long before the step's deadline")
        .unwrap()
        .expect_err("the step cannot succeed through a silent peer");
    eprintln!("found out {:?} after the peer went silent: {}", silent.elapsed(), error.message);
    assert_eq!((error.code.as_str(), error.retryable), ("EXECUTOR_UNAVAILABLE", true), "{error:?}");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn an_executor_runner_whose_postgres_goes_silent_still_stops_within_its_grace(pool: PgPool) {
    let (store, queues, stack) = Stack::fresh(pool.clone(), &[("RARA_SHUTDOWN_GRACE_SECONDS", "1")]).await;
    let run_id = submit_long_step(&store, &stack, 3).await;

    // The executor reaches Postgres through a peer that will go silent.
    let options = pool.connect_options().as_ref().clone();
    let peer = SilentPeer::start(std::net::SocketAddr::from(([127, 0, 0, 1], options.get_port())), false).await;
    let through = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(Duration::from_secs(2))
        .connect_with(options.host("127.0.0.1").port(peer.addr().port()))
        .await
        .unwrap();
    let registry = Arc::new(rara_runtime::registry::standard_registry(&stack.settings).await.unwrap());
    let executor = BatchExecutor::new(Store::new(through), stack.queue.clone(), registry, &stack.settings);
    let (stop, task) = runner_with_a_running_step(&store, &stack, executor, queues.queue(), run_id).await;
    peer.set_silent(true);
    stop.cancel();
    // Although Postgres does not answer.
    let counters = within_grace(task, "the runner").await;
    assert_eq!((counters.claimed, counters.released, counters.succeeded), (1, 0, 0), "{counters:?}");
    // Nothing could be written: the step is still held under its lease, which expires, and
    // its message was not deleted, so the claim takes the step over when it comes back.
    assert_eq!(step_row(&store, run_id).await.0, "running");
}

#[tokio::test]
async fn a_long_poll_may_take_its_whole_wait_beyond_the_attempt_timeout() {
    let queues = Queues::new(30, 10).await;
    let lookup = |k: &str| match k {
        "RARA_SQS_ATTEMPT_TIMEOUT_MS" => Some("500".to_owned()),
        "RARA_SQS_OPERATION_TIMEOUT_MS" => Some("800".to_owned()),
        _ => None,
    };
    let timeouts = rara_runtime::timeouts::Timeouts::from_vars(&rara_domain::config::Vars(&lookup)).unwrap();
    let peer = SilentPeer::start(endpoint_addr(), false).await;
    let queue = queues.queue_through(&peer, &timeouts).await;
    let started = Instant::now();
    let received = queue.receive(1, Duration::from_secs(2)).await.expect("an empty long poll is not a timeout");
    assert!(received.is_empty());
    assert!(started.elapsed() >= Duration::from_millis(1500), "it waited: {:?}", started.elapsed());
}

/// A silent SQS under a polling executor runner: every receive times out, and the runner
/// warns once for the burst, naming the queue, not once per receive; when SQS answers
/// again one line says that it recovered and how many errors it counted.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_silent_sqs_costs_one_warning_per_burst_not_one_per_receive(pool: PgPool) {
    // This test's own log lines (the runner runs on this thread: sqlx::test's runtime is
    // single-threaded and nothing below is spawned).
    let logs = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_env_filter("rara_runtime=info")
        .with_writer(move || LogSink(sink.clone()))
        .finish();
    let _logging = tracing::subscriber::set_default(subscriber);
    let (store, queues, stack) = Stack::fresh(
        pool,
        &[
            ("RARA_SQS_CONNECT_TIMEOUT_MS", "300"),
            ("RARA_SQS_ATTEMPT_TIMEOUT_MS", "300"),
            ("RARA_SQS_OPERATION_TIMEOUT_MS", "300"),
            ("RARA_SQS_MAX_ATTEMPTS", "1"),
        ],
    )
    .await;
    let peer = SilentPeer::start(endpoint_addr(), true).await;
    let queue: Arc<dyn Queue> = queues.queue_through(&peer, &stack.settings.timeouts).await;
    let registry = Arc::new(rara_runtime::registry::standard_registry(&stack.settings).await.unwrap());
    let executor = BatchExecutor::new(store.clone(), queue.clone(), registry, &stack.settings);
    let stop = CancellationToken::new();
    let options = stack.runner_options(None);
    let control = async {
        tokio::time::sleep(Duration::from_secs(7)).await;
        peer.set_silent(false);
        tokio::time::sleep(Duration::from_secs(3)).await;
        stop.cancel();
    };
    let (ran, ()) = tokio::join!(run_executor(&executor, queue, &options, stop.clone()), control);
    ran.unwrap();
    let text = String::from_utf8(logs.lock().unwrap().clone()).unwrap();
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let of = |call: &str, level: &str| -> Vec<&serde_json::Value> {
        lines.iter().filter(|l| l["level"] == level && l["fields"]["call"] == call).collect()
    };
    let warnings = of("receive", "WARN");
    assert_eq!(warnings.len(), 1, "one warning for the burst: {text}");
    assert_eq!(warnings[0]["fields"]["peer"], queues.url.as_str(), "the warning names the queue");
    let recovered = of("receive", "INFO");
    assert_eq!(recovered.len(), 1, "one line when SQS answers again: {text}");
    let errors = recovered[0]["fields"]["errors"].as_u64().unwrap();
    assert!(errors >= 3, "7 s of silence made several failed receives, all counted: {errors}");
    assert_eq!(recovered[0]["fields"]["suppressed"].as_u64(), Some(errors - 1));
}
