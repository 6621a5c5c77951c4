//! IAM in the loop: a packed message with a retrying step runs on Postgres + LocalStack's SQS
//! while every AWS call is recorded (`rara_platform::call_log`), then the calls are evaluated
//! by a real IAM policy simulator (`scripts/check-iam.sh`, tools/iam-check) against the
//! policies infra/template.yaml gives each role. LocalStack enforces no IAM; this does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use serde_json::Value;
use sqlx::PgPool;

/// The template as it was at d8e1b54: ExecutorRole may send only to the DLQ.
const OLD_TEMPLATE: &str = "tools/iam-check/test/fixtures/template-d8e1b54.yaml";

/// `scripts/check-iam.sh --json` on `log`, against `template` (default: each call's own):
/// whether every call passed, and the evaluated groups (role, action, resource, decision, sites).
fn iam_check(log: &Path, template: Option<&str>) -> (bool, Vec<Value>) {
    let mut command = std::process::Command::new(repo_root().join("scripts/check-iam.sh"));
    command.current_dir(repo_root()).arg("--json");
    if let Some(template) = template {
        command.args(["--template", template]);
    }
    let out = command.arg(log).output().expect("run scripts/check-iam.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let results = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("check-iam printed no results ({e}): {stdout} {}", String::from_utf8_lossy(&out.stderr))
    });
    (out.status.success(), results)
}

fn find<'a>(results: &'a [Value], role: &str, action: &str, resource: &str) -> Option<&'a Value> {
    results.iter().find(|r| r["role"] == role && r["action"] == action && r["resource"] == resource)
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_retrying_packed_step_moves_into_its_own_message_and_its_role_allows_every_call(pool: PgPool) {
    let dir = std::env::temp_dir().join(format!("rara-iam-{}", uuid::Uuid::new_v4().simple()));
    let log = rara_platform::call_log::record_to(&dir).expect("no AWS client was built before the log");
    let (store, queues, stack) = Stack::fresh(pool, &[("RARA_STEPS_PER_MESSAGE", "4")]).await;
    let run_id = submit(
        &store,
        &stack.settings,
        "name: packed-iam\nsteps:\n  - {name: a, operation: noop}\n  - {name: b, operation: noop}\n  - {name: c, operation: noop}\n  - name: flaky\n    operation: fail\n    input: {fail_attempts: 1, retryable: true}\n    max_attempts: 2\n    retry: {initial_delay_seconds: 1, max_delay_seconds: 1, multiplier: 1}\n",
    )
    .await;

    let (status, counters) = stack.run_until_finished(run_id, Duration::from_secs(60)).await;
    assert_eq!(status, "succeeded");
    // The flaky step's retry moved into a message of its own; its siblings' message was deleted.
    assert_eq!((counters.succeeded, counters.retried, counters.moved), (4, 1, 1), "{counters:?}");
    assert!(queues.dead_letters().await.is_empty());

    // Every call the scheduler and the executor made passes the template's roles.
    let (passed, results) = iam_check(&log, None);
    let failed: Vec<_> =
        results.iter().filter(|r| r["decision"] != "Allowed" && r["decision"] != "not evaluated").collect();
    assert!(passed && failed.is_empty(), "denied: {failed:#?}");
    let moved =
        find(&results, "ExecutorRole", "sqs:SendMessage", "GetAtt:StepQueue.Arn").expect("the move was recorded");
    assert_eq!(moved["decision"], "Allowed");
    let sites = moved["sites"].as_object().unwrap();
    assert!(sites.keys().all(|s| s.starts_with("shared/runtime/src/executor/")), "{sites:?}");
    assert!(find(&results, "SchedulerRole", "sqs:SendMessage", "GetAtt:StepQueue.Arn").is_some());
    // The local poller stands for Lambda's event source mapping, which uses the function's role.
    for action in ["sqs:ReceiveMessage", "sqs:DeleteMessage"] {
        assert_eq!(find(&results, "ExecutorRole", action, "GetAtt:StepQueue.Arn").unwrap()["decision"], "Allowed");
    }

    // The same calls against ExecutorRole as it was before the fix: the move alone is denied,
    // named with its call site, action and resource.
    let (passed, old) = iam_check(&log, Some(OLD_TEMPLATE));
    assert!(!passed, "the old ExecutorRole allowed the move");
    let denied: Vec<_> =
        old.iter().filter(|r| r["decision"] != "Allowed" && r["decision"] != "not evaluated").collect();
    assert_eq!(denied.len(), 1, "{denied:#?}");
    assert_eq!(
        (&denied[0]["role"], &denied[0]["action"], &denied[0]["resource"], &denied[0]["decision"]),
        (
            &Value::from("ExecutorRole"),
            &Value::from("sqs:SendMessage"),
            &Value::from("GetAtt:StepQueue.Arn"),
            &Value::from("ImplicitlyDenied")
        )
    );
    assert_eq!(denied[0]["arn"], "arn:aws:sqs:us-east-1:123456789012:StepQueue");
    assert_eq!(denied[0]["sites"], moved["sites"]);
    std::fs::remove_dir_all(&dir).ok();
}
