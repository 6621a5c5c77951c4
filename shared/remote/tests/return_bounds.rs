//! What a remote executor returns is bounded where it enters (`rara_remote::bounds`), against
//! a scripted `rara.v1` server on 127.0.0.1:0: an output beyond `RARA_MAX_OUTPUT_BYTES` (or a
//! gRPC message beyond the decoding limit), too many or oversized artifacts fail the attempt
//! with a permanent `OUTPUT_TOO_LARGE` that names the field and the bound (never the value);
//! error texts and progress messages are cut; `retry_after_seconds` is clamped; capabilities
//! with unusable names are ignored.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::*;
use rara_domain::executor::Executor;
use rara_domain::retry::MAX_RETRY_AFTER;
use rara_domain::step_error::codes;
use rara_remote::bounds::{self, Limits};
use rara_remote::pb;
use rara_remote::pb::execute_response::Event;
use rara_remote::{RemoteExecutor, RemoteExecutors};

const FOUR_MIB: usize = 4 * 1024 * 1024;

fn output_of(bytes: usize) -> String {
    format!(r#"{{"blob":"{}"}}"#, "x".repeat(bytes))
}

fn artifact(seq: u64, name: &str, uri: &str) -> Step {
    Step::Send(
        seq,
        Event::Artifact(pb::Artifact {
            name: name.into(),
            uri: uri.into(),
            media_type: "text/plain".into(),
            size_bytes: 1,
            digest: String::new(),
        }),
    )
}

fn failed_with(seq: u64, message: String, details: HashMap<String, String>) -> Step {
    let error = pb::Error { code: "SLOW_DOWN".into(), message, retryable: true, details };
    Step::Send(seq, Event::Failed(pb::Failed { error: Some(error) }))
}

async fn scripted(
    operation: &str,
    scripts: Vec<(&'static str, Vec<Step>)>,
    limits: Limits,
) -> (RemoteExecutor, std::sync::Arc<Seen>) {
    let (url, seen) = start_scripted(scripts).await;
    let channel = rara_remote::router::lazy_channel(&url).unwrap();
    (RemoteExecutor::new(channel, url, operation, "1.0.0").with_limits(limits), seen)
}

#[tokio::test]
async fn a_four_mib_output_fails_the_attempt_for_good_without_echoing_it() {
    let big = output_of(FOUR_MIB);
    let script = vec![accepted(1), running(2), succeeded(3, &big)];
    let (executor, seen) = scripted("big", vec![("big", script)], Limits::default()).await;
    let ctx = context("big", Duration::from_secs(20), RecordingReporter::new());
    let err = executor.execute(ctx, serde_json::json!({})).await.unwrap_err();
    assert_eq!((err.code.as_str(), err.retryable), (codes::OUTPUT_TOO_LARGE, false), "{}", err.message);
    assert!(err.message.contains(&Limits::default().max_decoding_message_size().to_string()), "{}", err.message);
    assert!(!err.message.contains("xxxx") && !err.details.to_string().contains("xxxx"), "never the value");
    assert_eq!(seen.cancels().len(), 1, "the attempt was told to stop");
}

#[tokio::test]
async fn an_output_beyond_the_setting_names_the_field_and_the_bound() {
    let limits = Limits { max_output_bytes: 1000, ..Limits::default() };
    let script = vec![accepted(1), running(2), succeeded(3, &output_of(2000))];
    let (executor, _) = scripted("big", vec![("big", script)], limits).await;
    let err = executor
        .execute(context("big", Duration::from_secs(20), RecordingReporter::new()), serde_json::json!({}))
        .await
        .unwrap_err();
    assert_eq!((err.code.as_str(), err.retryable), (codes::OUTPUT_TOO_LARGE, false));
    assert_eq!(err.details["field"], "output");
    assert_eq!(err.details["bound"], 1000);
    assert!(err.message.contains("RARA_MAX_OUTPUT_BYTES"), "{}", err.message);
}

#[tokio::test]
async fn more_artifacts_than_the_bound_fail_the_attempt_and_none_beyond_is_recorded() {
    let limits = Limits { max_artifacts: 3, ..Limits::default() };
    let mut script = vec![accepted(1), running(2)];
    script.extend((0..5).map(|i| artifact(3 + i, &format!("a{i}"), "s3://b/k")));
    script.push(succeeded(8, "{}"));
    let (executor, _) = scripted("many", vec![("many", script)], limits).await;
    let reporter = RecordingReporter::new();
    let err = executor
        .execute(context("many", Duration::from_secs(20), reporter.clone()), serde_json::json!({}))
        .await
        .unwrap_err();
    assert_eq!(
        (err.code.as_str(), err.retryable, err.details["field"].as_str()),
        (codes::OUTPUT_TOO_LARGE, false, Some("artifacts"))
    );
    assert_eq!(reporter.artifacts().len(), 3, "the three within the bound were recorded");
}

#[tokio::test]
async fn an_oversized_artifact_uri_fails_the_attempt_naming_the_field() {
    let uri = format!("s3://b/{}", "k".repeat(bounds::MAX_ARTIFACT_URI_BYTES));
    let script = vec![accepted(1), running(2), artifact(3, "a", &uri), succeeded(4, "{}")];
    let (executor, _) = scripted("uri", vec![("uri", script)], Limits::default()).await;
    let reporter = RecordingReporter::new();
    let err = executor
        .execute(context("uri", Duration::from_secs(20), reporter.clone()), serde_json::json!({}))
        .await
        .unwrap_err();
    assert_eq!((err.code.as_str(), err.details["field"].as_str()), (codes::OUTPUT_TOO_LARGE, Some("artifact.uri")));
    assert!(!err.message.contains("kkkk"), "{}", err.message);
    assert!(reporter.artifacts().is_empty());
}

#[tokio::test]
async fn a_hostile_failure_is_cut_and_its_retry_after_clamped() {
    let details = HashMap::from([
        ("retry_after_seconds".to_owned(), "1e300".to_owned()),
        ("blob".to_owned(), "d".repeat(64 * 1024)),
    ]);
    let script = vec![accepted(1), running(2), failed_with(3, "m".repeat(512 * 1024), details)];
    let (executor, _) = scripted("hostile", vec![("hostile", script)], Limits::default()).await;
    let err = executor
        .execute(context("hostile", Duration::from_secs(20), RecordingReporter::new()), serde_json::json!({}))
        .await
        .unwrap_err();
    assert_eq!((err.code.as_str(), err.retryable), ("SLOW_DOWN", true), "still the executor's failure");
    assert!(err.message.len() <= bounds::MAX_ERROR_MESSAGE_BYTES && err.message.ends_with(bounds::TRUNCATED));
    assert_eq!(err.details["retry_after_seconds"], MAX_RETRY_AFTER.as_secs_f64(), "clamped, a number");
    assert!(err.details.get("blob").is_none() && err.details["details_dropped_bytes"].as_u64().unwrap() > 64 * 1024);

    for bad in ["NaN", "-3", "soon"] {
        let details = HashMap::from([("retry_after_seconds".to_owned(), bad.to_owned())]);
        let script = vec![accepted(1), running(2), failed_with(3, "slow".into(), details)];
        let (executor, _) = scripted("bad", vec![("bad", script)], Limits::default()).await;
        let err = executor
            .execute(context("bad", Duration::from_secs(20), RecordingReporter::new()), serde_json::json!({}))
            .await
            .unwrap_err();
        assert!(err.details.get("retry_after_seconds").is_none(), "{bad}: {:?}", err.details);
    }
}

#[tokio::test]
async fn a_huge_progress_message_is_cut_before_it_is_reported() {
    let script = vec![accepted(1), running(2), progress(3, 1.0, &"p".repeat(1024 * 1024)), succeeded(4, "{}")];
    let (executor, _) = scripted("chatty", vec![("chatty", script)], Limits::default()).await;
    let reporter = RecordingReporter::new();
    executor
        .execute(context("chatty", Duration::from_secs(20), reporter.clone()), serde_json::json!({}))
        .await
        .unwrap();
    let [(fraction, message)] = reporter.progress().try_into().unwrap();
    assert_eq!(fraction, 1.0);
    assert!(message.len() <= bounds::MAX_PROGRESS_MESSAGE_BYTES && message.ends_with(bounds::TRUNCATED));
}

#[tokio::test]
async fn capabilities_with_unusable_names_or_versions_are_ignored() {
    let (url, seen) = start_scripted([]).await;
    seen.offer("good.op", "1.0.0");
    seen.offer(&"n".repeat(200), "1.0.0");
    seen.offer("bad name\n", "1.0.0");
    seen.offer("versioned", &"9".repeat(100));
    let router = RemoteExecutors::from_config_value(&url).unwrap();
    router.refresh().await;
    let names: Vec<String> = router.capabilities().await.into_iter().map(|c| c.name).collect();
    assert_eq!(names, ["good.op"]);
}
