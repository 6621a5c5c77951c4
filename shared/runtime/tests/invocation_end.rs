//! The end of an attempt is decided from the deadlines, not by which future a `select!` polls
//! first (issue 51): an in-process `sleep` longer than what its invocation has left, whose
//! executor's own deadline is the invocation's cut, fails for good at once with
//! `STEP_OUTLIVES_INVOCATION` after one attempt, every time.
//!
//! Each repetition is one SQS message through [`BatchExecutor::process`] on Postgres and
//! LocalStack, with an injected invocation deadline ([`CUT`] from the call): the message was
//! received that long before its invocation's end (less the margin), and the step's own
//! timeout (1 s) is longer. Before the fix about a third to a half of the repetitions ended
//! `retrying DEADLINE_EXCEEDED` instead (docs/src/internals/deadlines.md). The same holds for a
//! remote executor whose own deadline error comes a little before the cut.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use rara_domain::state::{AttemptOutcome, StepStatus};
use rara_domain::step_error::codes;
use rara_queue::Queue;
use rara_runtime::executor::Record;
use rara_runtime::scheduler::Scheduler;
use tokio::time::Instant;

/// How many times the scenario runs.
const REPETITIONS: usize = 50;
/// What the invocation has left when its message is handed to the executor.
const CUT: Duration = Duration::from_millis(150);
/// The step: it sleeps far longer than any invocation, it cannot detach, and it has
/// attempts to burn.
const WORKFLOW: &str = "name: long-sleep\nsteps:\n  - name: nap\n    operation: sleep\n    input: {seconds: 20}\n    \
                        timeout_seconds: 1\n    max_attempts: 3\n";

/// How one repetition ended: the step's status, its attempts, and the first attempt's error
/// (code, retryable).
type Ending = (StepStatus, usize, Option<(String, bool)>);

/// Submits `workflow`, lets the scheduler send its message, receives it and hands it to the
/// executor with [`CUT`] left in the invocation.
async fn one_invocation(stack: &Stack, scheduler: &Scheduler, workflow: &str) -> Ending {
    let run_id = submit(&stack.store, &stack.settings, workflow).await;
    assert_eq!(scheduler.pass().await.unwrap().sent, 1);
    let received = eventually("the step's message", || async {
        stack.queue.receive(1, Duration::from_secs(1)).await.unwrap().pop()
    })
    .await;
    let receipt_handle = received.receipt_handle.clone();
    let record = Record::from(received);
    let report = stack.executor.process(vec![record], Instant::now() + CUT).await;
    // As the runner would for an acknowledged record; a retry's message is dropped too, so
    // that the next repetition receives its own.
    stack.queue.delete(&[receipt_handle]).await.unwrap();
    let run = stack.store.run(run_id).await.unwrap();
    let step = &run.steps[0];
    let Some(first) = step.attempts.first() else { panic!("no attempt recorded: {step:#?}\n{report:#?}") };
    let failed_for_good = step.status == StepStatus::Failed;
    assert_eq!(first.outcome == AttemptOutcome::Failed, failed_for_good, "{:?}", first.outcome);
    assert_eq!(report.acknowledged.len(), usize::from(failed_for_good), "{report:?}");
    let error = first.error.as_ref().map(|e| (e.code.clone(), e.retryable));
    (step.status, step.attempts.len(), error)
}

/// Runs `workflow` `repetitions` times on `stack` and counts how each ended.
async fn tally(stack: &Stack, workflow: &str, repetitions: usize) -> BTreeMap<String, usize> {
    let scheduler = stack.scheduler();
    let mut tally = BTreeMap::new();
    for _ in 0..repetitions {
        let ending = one_invocation(stack, &scheduler, workflow).await;
        *tally.entry(format!("{ending:?}")).or_default() += 1;
    }
    tally
}

fn assert_cut_every_time(tally: &BTreeMap<String, usize>, repetitions: usize) {
    let expected: Ending = (StepStatus::Failed, 1, Some((codes::STEP_OUTLIVES_INVOCATION.to_owned(), false)));
    let expected = BTreeMap::from([(format!("{expected:?}"), repetitions)]);
    assert_eq!(tally, &expected, "how the {repetitions} repetitions ended");
}

/// Runs `test` on a multi-threaded runtime (the Lambda's) with a stack on a scratch database
/// (`extra` settings), dropped after.
fn on_multi_threaded_runtime<F: std::future::Future<Output = BTreeMap<String, usize>>>(
    extra: impl FnOnce() -> std::pin::Pin<Box<dyn std::future::Future<Output = Vec<(&'static str, String)>>>>,
    test: impl FnOnce(Stack) -> F,
) -> BTreeMap<String, usize> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let db = rara_testkit::scratch::ScratchDb::on_server_of_env("rara_invocation_end").unwrap();
        db.create_migrated().await.unwrap();
        let pool = sqlx::postgres::PgPoolOptions::new().connect_with(db.connect_options()).await.unwrap();
        let extra = extra().await;
        let extra: Vec<(&str, &str)> = extra.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (_store, _queues, stack) = Stack::fresh(pool.clone(), &extra).await;
        let tally = test(stack).await;
        pool.close().await;
        db.drop_database().await.unwrap();
        tally
    })
}

/// On a multi-threaded runtime, as in the Lambda: the executor's task and the execution's timer
/// are woken together and either may be seen first. (On a current-thread runtime the timer's
/// wake-up happened to come first every time, so the race did not show there.)
#[test]
fn a_step_cut_by_its_invocation_fails_for_good_after_one_attempt_every_time() {
    let tally = on_multi_threaded_runtime(
        || Box::pin(async { Vec::new() }),
        |stack| async move { tally(&stack, WORKFLOW, REPETITIONS).await },
    );
    assert_cut_every_time(&tally, REPETITIONS);
}

/// A remote executor that cannot detach, whose own deadline error (from the request's
/// `deadline`, on its own clock) comes a little before the cut: the cut's too.
#[test]
fn a_remote_step_failing_at_its_deadline_before_the_cut_fails_for_good_every_time() {
    let tally = on_multi_threaded_runtime(
        || Box::pin(async { vec![("RARA_REMOTE_EXECUTORS", punctual::start().await)] }),
        |stack| async move { tally(&stack, punctual::WORKFLOW, punctual::REPETITIONS).await },
    );
    assert_cut_every_time(&tally, punctual::REPETITIONS);
}

/// A `rara.v1` executor written from the proto: `outside.sleep` answers `DEADLINE_EXCEEDED`
/// [`EARLY`](punctual::EARLY) before the request's deadline.
mod punctual {
    use std::time::{Duration, SystemTime};

    use rara_remote::pb;
    use rara_remote::pb::execute_response::Event;
    use rara_remote::pb::executor_service_server::{ExecutorService, ExecutorServiceServer};
    use tokio::sync::mpsc;
    use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
    use tonic::{Request, Response, Status};

    pub const REPETITIONS: usize = 20;
    /// How much sooner than the request's deadline the executor gives up.
    pub const EARLY: Duration = Duration::from_millis(5);
    pub const WORKFLOW: &str = "name: remote-sleep\nsteps:\n  - name: nap\n    operation: outside.sleep\n    \
                                timeout_seconds: 1\n    max_attempts: 3\n";

    struct Punctual;

    fn event(sequence: u64, event: Event) -> Result<pb::ExecuteResponse, Status> {
        Ok(pb::ExecuteResponse { sequence, timestamp: None, event: Some(event) })
    }

    #[tonic::async_trait]
    impl ExecutorService for Punctual {
        async fn get_capabilities(
            &self,
            _: Request<pb::GetCapabilitiesRequest>,
        ) -> Result<Response<pb::GetCapabilitiesResponse>, Status> {
            let sleep = pb::Capability { name: "outside.sleep".into(), version: "1.0.0".into(), ..Default::default() };
            Ok(Response::new(pb::GetCapabilitiesResponse { capabilities: vec![sleep] }))
        }

        type ExecuteStream = ReceiverStream<Result<pb::ExecuteResponse, Status>>;

        async fn execute(&self, request: Request<pb::ExecuteRequest>) -> Result<Response<Self::ExecuteStream>, Status> {
            let deadline = request.into_inner().deadline.map(|d| SystemTime::try_from(d).unwrap());
            let left = deadline.unwrap().duration_since(SystemTime::now()).unwrap_or_default();
            let (tx, rx) = mpsc::channel(4);
            tokio::spawn(async move {
                let _ = tx.send(event(1, Event::Accepted(pb::Accepted {}))).await;
                let _ = tx.send(event(2, Event::Running(pb::Running::default()))).await;
                tokio::time::sleep(left.saturating_sub(EARLY)).await;
                let error = pb::Error {
                    code: "DEADLINE_EXCEEDED".into(),
                    message: "sleep: the execution deadline passed".into(),
                    retryable: true,
                    ..Default::default()
                };
                let _ = tx.send(event(3, Event::Failed(pb::Failed { error: Some(error) }))).await;
            });
            Ok(Response::new(ReceiverStream::new(rx)))
        }

        async fn cancel(&self, _: Request<pb::CancelRequest>) -> Result<Response<pb::CancelResponse>, Status> {
            Ok(Response::new(pb::CancelResponse { found: false }))
        }

        type AttachStream = ReceiverStream<Result<pb::ExecuteResponse, Status>>;

        async fn attach(&self, _: Request<pb::AttachRequest>) -> Result<Response<Self::AttachStream>, Status> {
            Err(Status::unimplemented("nothing detaches here"))
        }
    }

    /// Serves on 127.0.0.1:0 (bound before this returns); its URL.
    pub async fn start() -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(ExecutorServiceServer::new(Punctual))
                .serve_with_incoming(TcpListenerStream::new(listener)),
        );
        url
    }
}
