//! The conformance suite against three executors written apart, each asking for a token: the
//! real Python executor (`executors/python`, with its conformance capabilities), a minimal Rust
//! executor written from the proto alone (`tests/common`) and an outsider's Node executor
//! written from the proto alone (`executors/node-outsider`). All must conform; each
//! deliberately broken variant of the Rust one must fail the suite on exactly the rule it
//! breaks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Flaw;
use rara_conformance::{Rule, Verdict};
use rara_testkit::python::{Guard, PythonServer};

/// The token the guarded Python executor accepts and the suite sends.
const PYTHON_TOKEN: &str = "python-conformance-token-01";

#[tokio::test]
async fn the_python_executor_conforms() {
    let guard = Guard {
        tokens: vec![PYTHON_TOKEN.to_owned()],
        env: vec![("RARA_WORKER_CONFORMANCE".to_owned(), "1".to_owned())],
        ..Guard::default()
    };
    let server = PythonServer::start_guarded(&guard);
    let security =
        rara_remote::Security::default().with_token(PYTHON_TOKEN).unwrap().with_attempt_key("p".repeat(32)).unwrap();
    let report = rara_conformance::run_with(server.url(), security).await.unwrap();
    assert!(report.conforms(), "{report}\nserver log:\n{}", server.log());
    // It advertises detachable capabilities, so the attach rules ran too.
    for rule in Rule::ALL {
        assert_eq!(report.verdict(rule), Some(&Verdict::Passed), "{rule}: {report}");
    }
}

#[tokio::test]
async fn the_minimal_rust_executor_conforms() {
    let report = rara_conformance::run_with(&common::start(None).await, common::security()).await.unwrap();
    assert!(report.conforms(), "{report}");
    // Nothing there is detachable: the attach rules are skipped, every other one passed.
    for rule in Rule::ALL {
        let expected = match rule {
            Rule::Detach | Rule::AttachRefusals => "skip",
            _ => "pass",
        };
        let verdict = match report.verdict(rule) {
            Some(Verdict::Passed) => "pass",
            Some(Verdict::Skipped(_)) => "skip",
            _ => "fail",
        };
        assert_eq!(verdict, expected, "{rule}: {report}");
    }
}

/// Runs the suite against the minimal executor broken by `flaw`.
async fn broken(flaw: Flaw) -> rara_conformance::Report {
    let report = rara_conformance::run_with(&common::start(Some(flaw)).await, common::security()).await.unwrap();
    assert!(!report.conforms(), "{flaw:?} must fail the suite: {report}");
    report
}

#[tokio::test]
async fn succeeded_before_running_is_reported_as_an_order_violation() {
    let report = broken(Flaw::SucceedsBeforeRunning).await;
    let what = report.violation(Rule::Order).unwrap_or_else(|| panic!("{report}"));
    assert!(what.contains("event #2 was succeeded; expected running"), "{what}");
}

#[tokio::test]
async fn cancel_answering_not_found_is_reported_for_running_attempts_only() {
    let report = broken(Flaw::CancelNotFound).await;
    let what = report.violation(Rule::CancelRunning).unwrap_or_else(|| panic!("{report}"));
    assert!(what.contains("Cancel of the running attempt answered found=false"), "{what}");
    assert!(report.violation(Rule::CancelChatty).is_some(), "{report}");
    assert_eq!(report.verdict(Rule::Order), Some(&Verdict::Passed), "{report}");
}

#[tokio::test]
async fn an_attempt_that_outlives_its_call_is_reported() {
    let report = broken(Flaw::IgnoresCallCancellation).await;
    let what = report.violation(Rule::CallCancellation).unwrap_or_else(|| panic!("{report}"));
    assert!(what.contains("still ran"), "{what}");
    assert_eq!(report.violations().count(), 1, "{report}");
}

#[tokio::test]
async fn an_executor_that_sends_no_heartbeats_is_reported() {
    let report = broken(Flaw::NoHeartbeats).await;
    let what = report.violation(Rule::Heartbeat).unwrap_or_else(|| panic!("{report}"));
    assert!(what.contains("no heartbeat"), "{what}");
    assert_eq!(report.violations().count(), 1, "{report}");
}

#[tokio::test]
async fn an_executor_that_serves_calls_without_the_token_is_reported() {
    let report = broken(Flaw::NoAuth).await;
    let what = report.violation(Rule::Authentication).unwrap_or_else(|| panic!("{report}"));
    assert!(what.contains("Execute without the token was accepted"), "{what}");
    assert_eq!(report.violations().count(), 1, "{report}");
}

#[tokio::test]
async fn an_executor_that_ignores_attempt_secrets_is_reported() {
    let report = broken(Flaw::IgnoresSecrets).await;
    let what = report.violation(Rule::AttemptSecret).unwrap_or_else(|| panic!("{report}"));
    assert!(what.contains("Cancel with another secret"), "{what}");
    assert!(what.contains("a forged Execute with a larger fence stopped it"), "{what}");
    assert_eq!(report.violations().count(), 1, "{report}");
}

/// The token the outsider's Node executor accepts.
const NODE_TOKEN: &str = "node-outsider-token-000001";

/// `node executors/node-outsider/server.js` on a free port (its packages installed with
/// `npm ci` first when missing); killed on drop.
struct NodeOutsider(std::process::Child);

impl NodeOutsider {
    fn start() -> (NodeOutsider, String) {
        use std::io::BufRead;
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../executors/node-outsider");
        if !dir.join("node_modules").exists() {
            let npm =
                std::process::Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(&dir).status();
            assert!(npm.is_ok_and(|s| s.success()), "npm ci in {}", dir.display());
        }
        let mut child = std::process::Command::new("node")
            .args(["server.js", "0"])
            .current_dir(&dir)
            .env("RARA_EXECUTOR_TOKENS", NODE_TOKEN)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("node runs");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let address = line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("node said {line:?}"));
        let url = format!("http://{address}");
        (NodeOutsider(child), url)
    }
}

impl Drop for NodeOutsider {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn the_outsider_node_executor_conforms_with_auth_on() {
    let (_node, url) = NodeOutsider::start();
    let security =
        rara_remote::Security::default().with_token(NODE_TOKEN).unwrap().with_attempt_key("n".repeat(32)).unwrap();
    let report = rara_conformance::run_with(&url, security).await.unwrap();
    assert!(report.conforms(), "{report}");
    for rule in Rule::ALL {
        let expected = match rule {
            Rule::Detach | Rule::AttachRefusals => "skip", // nothing there is detachable
            _ => "pass",
        };
        let verdict = match report.verdict(rule) {
            Some(Verdict::Passed) => "pass",
            Some(Verdict::Skipped(_)) => "skip",
            _ => "fail",
        };
        assert_eq!(verdict, expected, "{rule}: {report}");
    }
}
