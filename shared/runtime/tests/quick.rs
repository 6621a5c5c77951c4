//! Quick steps end to end (DESIGN.md "Quick steps"), on Postgres + LocalStack's SQS through the
//! local scheduler and executor runners: `noop` steps are locked, run and recorded in one
//! transaction; a step that is not quick, and a quick one whose input takes a reference or a
//! secret, go through the ordinary claim in the same batches; every attempt is one row,
//! counted once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use rara_platform::secrets::EnvSecretResolver;
use rara_queue::Queue;
use rara_runtime::executor::Record;
use serde_json::json;
use sqlx::PgPool;

const LIMIT: Duration = Duration::from_secs(60);

const MIXED: &str = "name: mixed
steps:
  - {name: a, operation: noop}
  - {name: b, operation: noop}
  - {name: c, operation: noop}
  - {name: slow, operation: sleep, input: {seconds: 0.1}}
  - {name: broken, operation: fail, input: {fail_attempts: 1, retryable: false}}
  - name: echo
    operation: noop
    depends_on: [a]
    input: {got: {$output: a}}
  - name: secretive
    operation: noop
    input: {token: {$secret: quick_token}}
";

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn quick_steps_are_recorded_in_their_locks_transaction_and_the_rest_as_usual(pool: PgPool) {
    let (store, _queues, mut stack) = Stack::fresh(pool.clone(), &[]).await;
    // `secretive` reads a secret this resolver does not know: resolved at claim, it fails
    // there for good (SECRET_NOT_FOUND); run quick, it would have succeeded unresolved.
    stack.executor = stack.executor.clone().with_secrets(Arc::new(EnvSecretResolver::from_lookup([], None)));
    store.grant_secret("quick_token", "*", "noop", None).await.unwrap();
    let run_id = submit(&store, &stack.settings, MIXED).await;
    let (status, counters) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "failed", "`broken` fails for good");
    // a, b and c ran quick; `echo` takes a reference and `secretive` a secret (both resolved at
    // claim), `slow` and `broken` are not quick: they went through the claim.
    assert_eq!(counters.quick, 3, "{counters:?}");
    assert_eq!((counters.succeeded, counters.failed), (5, 2), "{counters:?}");
    assert_eq!(counters.claimed, 7, "{counters:?}");

    let run = store.run(run_id).await.unwrap();
    for step in &run.steps {
        assert_eq!(step.attempt, 1, "{}", step.name);
        assert_eq!(step.attempts.len(), 1, "{}: one attempt row", step.name);
        let attempt = &step.attempts[0];
        assert!(attempt.finished_at.unwrap() >= attempt.started_at, "{}", step.name);
        assert_eq!(step.finished_at, attempt.finished_at, "{}", step.name);
    }
    let step = |name: &str| run.steps.iter().find(|s| s.name == name).unwrap();
    assert_eq!(step("a").output, Some(json!({})));
    assert_eq!(step("echo").status.to_string(), "succeeded");
    assert_eq!(step("echo").attempts[0].input, Some(json!({"got": {}})), "resolved at claim, and recorded");
    assert_eq!(step("broken").status.to_string(), "failed");
    assert_eq!(step("secretive").error.as_ref().map(|e| e.code.as_str()), Some("SECRET_NOT_FOUND"));
    // Every fence is distinct: each attempt was fenced once, quick or not.
    let mut fences: Vec<i64> = run.steps.iter().map(|s| s.attempts[0].fence).collect();
    fences.sort_unstable();
    fences.dedup();
    assert_eq!(fences.len(), run.steps.len());
}

/// The scheduler's messages say which operations their steps run (`rara_operations`, through
/// SQS and back); a batch of which no message names a quick operation goes straight to the
/// claim, without the quick lock's transaction. A message without the attribute (an older
/// scheduler's, a redriven one) may name anything: its batch takes the lock, which finds
/// nothing here, and its steps run as usual.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_batch_whose_messages_name_no_quick_operation_takes_no_quick_lock(pool: PgPool) {
    // Both steps of a run in one message.
    let (store, _queues, stack) = Stack::fresh(pool, &[("RARA_STEPS_PER_MESSAGE", "2")]).await;
    let naps = "name: naps\nsteps:\n  - {name: a, operation: sleep, input: {seconds: 0}}\n  - {name: b, operation: sleep, input: {seconds: 0}}\n";
    let mixed =
        "name: mixed\nsteps:\n  - {name: a, operation: sleep, input: {seconds: 0}}\n  - {name: b, operation: noop}\n";
    for (workflow, operations, strip, quick_locks, quick) in [
        (naps, vec!["sleep"], false, 0, 0),
        (naps, vec!["sleep"], true, 1, 0),
        (mixed, vec!["noop", "sleep"], false, 1, 1),
    ] {
        let run_id = submit(&store, &stack.settings, workflow).await;
        let counters = stack.scheduler().pass().await.unwrap();
        assert_eq!((counters.sent, counters.messages), (2, 1));
        let message = eventually("the run's message", || async {
            stack.queue.receive(1, Duration::from_secs(1)).await.unwrap().pop()
        })
        .await;
        let mut said = message.operations.as_deref().and_then(rara_queue::operations::decode).unwrap_or_default();
        said.sort_unstable();
        assert_eq!(said, operations, "the message says its steps' operations, each once");
        let (message_id, receipt_handle) = (message.message_id.clone(), message.receipt_handle.clone());
        let mut record = Record::from(message);
        if strip {
            record.operations = None;
        }
        let report = stack.executor.process(vec![record], tokio::time::Instant::now() + LIMIT).await;
        let c = &report.counters;
        assert_eq!(
            (c.quick_locks, c.quick, c.succeeded),
            (quick_locks, quick, 2),
            "{workflow} stripped: {strip}; {c:?}"
        );
        assert!(report.is_acknowledged(&message_id) && report.returned().is_empty(), "the message settled");
        stack.queue.delete(&[receipt_handle]).await.unwrap();
        let run = store.run(run_id).await.unwrap();
        assert!(run.steps.iter().all(|s| s.status.to_string() == "succeeded" && s.attempts.len() == 1));
    }
}
