//! The end of an attempt is decided from the deadlines, not by which future a `select!` polls
//! first (issue 51): an in-process `sleep` longer than what its invocation has left, whose
//! executor's own deadline is the invocation's cut, fails for good at once with
//! `STEP_OUTLIVES_INVOCATION` after one attempt, every time.
//!
//! Each repetition is one SQS message through [`BatchExecutor::process`] on Postgres and
//! LocalStack, with an injected invocation deadline ([`CUT`] from the call): the message was
//! received that long before its invocation's end (less the margin), and the step's own
//! timeout (1 s) is longer. Before the fix about a third to a half of the repetitions ended
//! `retrying DEADLINE_EXCEEDED` instead (docs/src/internals/deadlines.md).
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

/// Submits the workflow, lets the scheduler send its message, receives it and hands it to the
/// executor with [`CUT`] left in the invocation.
async fn one_invocation(stack: &Stack, scheduler: &Scheduler) -> Ending {
    let run_id = submit(&stack.store, &stack.settings, WORKFLOW).await;
    assert_eq!(scheduler.pass().await.unwrap().sent, 1);
    let received = eventually("the step's message", || async {
        stack.queue.receive(1, Duration::from_secs(1)).await.unwrap().pop()
    })
    .await;
    let receipt_handle = received.receipt_handle;
    let record = Record {
        message_id: received.message_id,
        receipt_handle: receipt_handle.clone(),
        body: received.body,
        traceparent: received.traceparent,
        sent_at: None,
    };
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

/// Runs the scenario [`REPETITIONS`] times on `stack` and counts how each ended.
async fn tally(stack: &Stack) -> BTreeMap<String, usize> {
    let scheduler = stack.scheduler();
    let mut tally = BTreeMap::new();
    for _ in 0..REPETITIONS {
        let ending = one_invocation(stack, &scheduler).await;
        *tally.entry(format!("{ending:?}")).or_default() += 1;
    }
    tally
}

fn assert_cut_every_time(tally: &BTreeMap<String, usize>) {
    let expected: Ending = (StepStatus::Failed, 1, Some((codes::STEP_OUTLIVES_INVOCATION.to_owned(), false)));
    let expected = BTreeMap::from([(format!("{expected:?}"), REPETITIONS)]);
    assert_eq!(tally, &expected, "how the {REPETITIONS} repetitions ended");
}

/// On a multi-threaded runtime, as in the Lambda: the executor's task and the execution's timer
/// are woken together and either may be seen first. (On a current-thread runtime the timer's
/// wake-up happened to come first every time, so the race did not show there.)
#[test]
fn a_step_cut_by_its_invocation_fails_for_good_after_one_attempt_every_time() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let tally = runtime.block_on(async {
        let db = rara_testkit::scratch::ScratchDb::on_server_of_env("rara_invocation_end").unwrap();
        db.create_migrated().await.unwrap();
        let pool = sqlx::postgres::PgPoolOptions::new().connect_with(db.connect_options()).await.unwrap();
        let (_store, _queues, stack) = Stack::fresh(pool.clone(), &[]).await;
        let tally = tally(&stack).await;
        pool.close().await;
        db.drop_database().await.unwrap();
        tally
    });
    assert_cut_every_time(&tally);
}
