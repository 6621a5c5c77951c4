//! The client against a Rust `rara.v1` server on 127.0.0.1:0 that misbehaves on purpose: every
//! way a stream can break the contract ends in the exact error code and retry class the
//! contract gives it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use rara_domain::StepError;
use rara_domain::executor::Executor;
use rara_domain::step_error::codes;
use rara_remote::RemoteExecutor;
use rara_remote::pb;
use rara_remote::pb::execute_response::Event;
use serde_json::json;
use tokio::time::Instant;
use tonic::Status;

fn scripts() -> Vec<(&'static str, Vec<Step>)> {
    let artifact = pb::Artifact {
        name: "out.json".into(),
        uri: "s3://bucket/out.json".into(),
        media_type: "application/json".into(),
        size_bytes: 12,
        digest: "sha256:ab".into(),
    };
    vec![
        (
            "well_behaved",
            vec![
                accepted(1),
                running(2),
                progress(3, 0.5, "half way"),
                Step::Send(4, Event::Artifact(artifact)),
                progress(5, 1.0, "done"),
                succeeded(6, r#"{"answer":42}"#),
            ],
        ),
        ("running_first", vec![running(1), accepted(2), succeeded(3, "{}")]),
        ("progress_after_succeeded", vec![accepted(1), running(2), succeeded(3, "{}"), progress(4, 1.0, "late")]),
        ("two_terminals", vec![accepted(1), running(2), succeeded(3, "{}"), failed(4, "BOOM", false)]),
        ("sequence_gap", vec![accepted(1), running(3), succeeded(4, "{}")]),
        ("blank_event", vec![accepted(1), Step::Blank(2)]),
        ("ends_early", vec![accepted(1), running(2), progress(3, 0.3, "a third")]),
        ("breaks", vec![accepted(1), running(2), progress(3, 0.3, "a third"), Step::Fail(Status::internal("boom"))]),
        ("slow", vec![accepted(1), running(2), Step::ProgressForever(3)]),
        ("quiet", vec![accepted(1), running(2), Step::Quiet]),
        (
            "heartbeats",
            vec![accepted(1), Step::Heartbeat, running(2), Step::Heartbeat, Step::Heartbeat, succeeded(3, "{}")],
        ),
        ("fails", vec![accepted(1), running(2), failed(3, "BOOM", true)]),
        (
            "cancelled_remotely",
            vec![accepted(1), running(2), Step::Send(3, Event::Cancelled(pb::Cancelled { reason: "operator".into() }))],
        ),
        ("bad_output", vec![accepted(1), running(2), succeeded(3, "not json")]),
        ("array_output", vec![accepted(1), running(2), succeeded(3, "[1,2,3]")]),
        ("empty_output", vec![accepted(1), running(2), succeeded(3, "")]),
    ]
}

async fn executor(operation: &str) -> (RemoteExecutor, std::sync::Arc<Seen>) {
    let (url, seen) = start_scripted(scripts()).await;
    let channel = rara_remote::router::lazy_channel(&url).unwrap();
    (RemoteExecutor::new(channel, url, operation, "1.0.0"), seen)
}

async fn run(operation: &str) -> (Result<serde_json::Value, StepError>, std::sync::Arc<RecordingReporter>) {
    let (executor, _seen) = executor(operation).await;
    let reporter = RecordingReporter::new();
    let ctx = context(operation, Duration::from_secs(10), reporter.clone());
    (executor.execute(ctx, json!({"k": "v"})).await, reporter)
}

fn assert_error(outcome: Result<serde_json::Value, StepError>, code: &str, retryable: bool) -> StepError {
    let err = outcome.expect_err("the execution must fail");
    assert_eq!(err.code, code, "{err:?}");
    assert_eq!(err.retryable, retryable, "{err:?}");
    err
}

#[tokio::test]
async fn a_well_behaved_stream_returns_the_output_and_forwards_reports_in_order() {
    let (executor, seen) = executor("well_behaved").await;
    let reporter = RecordingReporter::new();
    let ctx = context("well_behaved", Duration::from_secs(10), reporter.clone());
    let (run_id, step_id) = (ctx.run_id, ctx.step_id);
    let output = executor.execute(ctx, json!({"k": "v"})).await.unwrap();
    assert_eq!(output, json!({"answer": 42}));
    assert_eq!(
        reporter.reports(),
        vec![
            Report::Progress(0.5, "half way".into()),
            Report::Artifact(rara_domain::executor::Artifact {
                name: "out.json".into(),
                uri: "s3://bucket/out.json".into(),
                media_type: Some("application/json".into()),
                size_bytes: Some(12),
                digest: Some("sha256:ab".into()),
            }),
            Report::Progress(1.0, "done".into()),
        ]
    );
    let sent = seen.executes.lock().unwrap()[0].clone();
    assert_eq!(sent.run_id, run_id.to_string());
    assert_eq!(sent.step_id, step_id.to_string());
    // An unpinned step sends no version: the executor runs its newest.
    assert_eq!((sent.operation.as_str(), sent.capability_version.as_str()), ("well_behaved", ""));
    assert_eq!((sent.attempt, sent.fence), (1, 7));
    assert_eq!(serde_json::from_str::<serde_json::Value>(&sent.input_json).unwrap(), json!({"k": "v"}));
    let deadline = sent.deadline.expect("the deadline is always sent");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    assert!((now + 5..=now + 11).contains(&deadline.seconds), "deadline {deadline:?} is about 10 s ahead");
    assert!(seen.cancels().is_empty());
}

#[tokio::test]
async fn running_before_accepted_is_a_permanent_protocol_violation() {
    let (outcome, _) = run("running_first").await;
    let err = assert_error(outcome, codes::PROTOCOL_VIOLATION, false);
    assert!(err.message.contains("event #1 was running; expected accepted"), "{}", err.message);
}

#[tokio::test]
async fn progress_after_succeeded_is_a_permanent_protocol_violation() {
    let (outcome, _) = run("progress_after_succeeded").await;
    let err = assert_error(outcome, codes::PROTOCOL_VIOLATION, false);
    assert!(err.message.contains("event #4 (progress) came after the terminal event succeeded"), "{}", err.message);
}

#[tokio::test]
async fn two_terminal_events_are_a_permanent_protocol_violation() {
    let (outcome, _) = run("two_terminals").await;
    let err = assert_error(outcome, codes::PROTOCOL_VIOLATION, false);
    assert!(err.message.contains("event #4 (failed) came after the terminal event succeeded"), "{}", err.message);
}

#[tokio::test]
async fn a_sequence_gap_is_a_permanent_protocol_violation() {
    let (outcome, _) = run("sequence_gap").await;
    let err = assert_error(outcome, codes::PROTOCOL_VIOLATION, false);
    assert!(err.message.contains("event #2 (running) has sequence 3, expected 2"), "{}", err.message);
}

#[tokio::test]
async fn an_event_without_a_case_is_a_permanent_protocol_violation() {
    let (outcome, _) = run("blank_event").await;
    let err = assert_error(outcome, codes::PROTOCOL_VIOLATION, false);
    assert!(err.message.contains("event #2 (sequence 2) carries no event; expected running"), "{}", err.message);
}

#[tokio::test]
async fn output_that_is_not_json_is_a_permanent_protocol_violation() {
    let (outcome, _) = run("bad_output").await;
    assert_error(outcome, codes::PROTOCOL_VIOLATION, false);
}

/// `grpc-timeout` as gRPC spells it (an integer and a unit), as a duration.
fn grpc_timeout(value: &str) -> Duration {
    let (digits, unit) = value.split_at(value.len() - 1);
    let n: u64 = digits.parse().unwrap();
    match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        other => panic!("not a grpc-timeout unit: {other}"),
    }
}

#[tokio::test]
async fn the_call_carries_the_attempts_deadline_plus_the_grace_as_its_grpc_deadline() {
    let (executor, seen) = executor("well_behaved").await;
    let reporter = RecordingReporter::new();
    executor.execute(context("well_behaved", Duration::from_secs(30), reporter), json!({})).await.unwrap();
    let sent = seen.execute_timeouts.lock().unwrap().clone();
    let timeout = grpc_timeout(sent[0].as_deref().expect("a grpc-timeout header"));
    let expected = Duration::from_secs(30) + rara_remote::client::DEADLINE_GRACE;
    assert!(timeout <= expected && timeout > expected - Duration::from_secs(1), "{timeout:?}");
}

#[tokio::test]
async fn output_that_is_not_an_object_is_a_permanent_protocol_violation_and_empty_output_is_an_empty_object() {
    let err = run("array_output").await.0.unwrap_err();
    assert_eq!((err.code.as_str(), err.retryable), (codes::PROTOCOL_VIOLATION, false));
    assert!(err.message.contains("must be a JSON object, not an array"), "{}", err.message);
    assert_eq!(run("empty_output").await.0.unwrap(), json!({}));
}

#[tokio::test]
async fn a_stream_ending_before_its_terminal_event_is_retryable_unavailability() {
    let (outcome, reporter) = run("ends_early").await;
    let err = assert_error(outcome, codes::EXECUTOR_UNAVAILABLE, true);
    assert!(err.message.contains("without a terminal event"), "{}", err.message);
    assert_eq!(reporter.progress(), vec![(0.3, "a third".to_owned())]);
}

#[tokio::test]
async fn a_stream_that_breaks_mid_way_is_retryable_unavailability() {
    let (outcome, _) = run("breaks").await;
    let err = assert_error(outcome, codes::EXECUTOR_UNAVAILABLE, true);
    assert!(err.message.contains("the stream broke after 3 event(s)"), "{}", err.message);
    assert_eq!(err.details["grpc_code"], "Internal");
}

#[tokio::test]
async fn an_unreachable_executor_is_retryable_unavailability() {
    // Bind and drop a listener so the port is (almost certainly) closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    let executor = RemoteExecutor::new(rara_remote::router::lazy_channel(&url).unwrap(), url, "sleep", "1.0.0");
    let outcome =
        executor.execute(context("sleep", Duration::from_secs(10), RecordingReporter::new()), json!({})).await;
    let err = assert_error(outcome, codes::EXECUTOR_UNAVAILABLE, true);
    assert!(err.message.contains("the call could not start"), "{}", err.message);
}

#[tokio::test]
async fn a_server_without_the_operation_script_answers_unimplemented_which_is_permanent() {
    let (outcome, _) = run("not_scripted").await;
    assert_error(outcome, codes::EXECUTOR_UNAVAILABLE, false);
}

#[tokio::test]
async fn a_remote_failure_keeps_its_code_retry_class_and_details() {
    let (outcome, _) = run("fails").await;
    let err = assert_error(outcome, "BOOM", true);
    assert_eq!(err.message, "BOOM happened");
    assert_eq!(err.details, json!({"where": "scripted"}));
}

#[tokio::test]
async fn a_remote_cancellation_is_a_permanent_cancelled_error() {
    let (outcome, _) = run("cancelled_remotely").await;
    let err = assert_error(outcome, codes::CANCELLED, false);
    assert!(err.message.contains("operator"), "{}", err.message);
}

#[tokio::test]
async fn a_slow_stream_past_its_deadline_is_retryable_and_the_server_is_told_to_cancel() {
    let (executor, seen) = executor("slow").await;
    let ctx = context("slow", Duration::from_millis(600), RecordingReporter::new());
    let (step_id, deadline) = (ctx.step_id, ctx.deadline);
    let err = assert_error(executor.execute(ctx, json!({})).await, codes::DEADLINE_EXCEEDED, true);
    assert!(Instant::now() < deadline + Duration::from_secs(3), "the call ended promptly: {err:?}");
    let cancels = seen.cancels();
    assert_eq!(cancels.len(), 1, "{cancels:?}");
    assert_eq!((cancels[0].step_id.as_str(), cancels[0].attempt), (step_id.to_string().as_str(), 1));
    assert_eq!(cancels[0].reason, "the attempt's deadline passed");
}

#[tokio::test]
async fn cancelling_the_step_cancels_the_remote_attempt() {
    let (executor, seen) = executor("slow").await;
    let reporter = RecordingReporter::new();
    let ctx = context("slow", Duration::from_secs(30), reporter.clone());
    let cancel = ctx.cancel.clone();
    let started = Instant::now();
    let call = tokio::spawn(async move { executor.execute(ctx, json!({})).await });
    reporter.wait_for_progress().await;
    cancel.cancel();
    let err = assert_error(call.await.unwrap(), codes::CANCELLED, false);
    assert!(started.elapsed() < Duration::from_secs(5), "{err:?}");
    let cancels = seen.cancels();
    assert_eq!(cancels.len(), 1);
    assert_eq!(cancels[0].reason, "the step was cancelled");
}

#[tokio::test]
async fn a_lost_lease_stops_the_execution_and_cancels_the_remote_attempt() {
    let (executor, seen) = executor("slow").await;
    let reporter = RecordingReporter::losing_the_lease();
    let ctx = context("slow", Duration::from_secs(30), reporter.clone());
    let err = assert_error(executor.execute(ctx, json!({})).await, codes::CANCELLED, false);
    assert!(err.message.contains("lease was lost"), "{}", err.message);
    assert_eq!(reporter.progress().len(), 1, "nothing is reported after the lease is lost");
    assert_eq!(seen.cancels()[0].reason, "rara lost the step's lease");
}

#[tokio::test]
async fn an_already_expired_deadline_fails_without_calling_the_executor() {
    let (executor, seen) = executor("well_behaved").await;
    let ctx = context("well_behaved", Duration::ZERO, RecordingReporter::new());
    assert_error(executor.execute(ctx, json!({})).await, codes::DEADLINE_EXCEEDED, true);
    assert!(seen.executes.lock().unwrap().is_empty());
}

/// An executor that keeps the call (and the connection: pings are answered) open but sends
/// nothing after `running`: the idle timeout (3 heartbeat intervals) ends the attempt as a
/// retryable EXECUTOR_UNAVAILABLE long before its deadline, and `Cancel` is sent.
#[tokio::test]
async fn a_stream_silent_past_its_idle_timeout_is_a_retryable_executor_unavailable() {
    let (executor, seen) = executor("quiet").await;
    let executor = executor.with_heartbeat_interval(Duration::from_millis(100));
    let ctx = context("quiet", Duration::from_secs(30), RecordingReporter::new());
    let started = Instant::now();
    let err = assert_error(executor.execute(ctx, json!({})).await, codes::EXECUTOR_UNAVAILABLE, true);
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(5), "{took:?}: {err:?}");
    assert!(err.message.contains("sent nothing for 300 ms"), "{err:?}");
    assert_eq!(seen.executes.lock().unwrap()[0].heartbeat_interval_ms, 100, "the request asks for heartbeats");
    assert_eq!(seen.cancels().len(), 1, "Cancel sent to the silent executor");
}

/// A call that never starts (the executor takes it and sends no response headers) is as
/// silent as a stream: the idle timeout ends it as a retryable EXECUTOR_UNAVAILABLE.
#[tokio::test]
async fn a_call_that_never_starts_ends_at_its_idle_timeout() {
    let (executor, _seen) = executor("never_starts").await;
    let executor = executor.with_heartbeat_interval(Duration::from_millis(100));
    let ctx = context("never_starts", Duration::from_secs(30), RecordingReporter::new());
    let started = Instant::now();
    let err = assert_error(executor.execute(ctx, json!({})).await, codes::EXECUTOR_UNAVAILABLE, true);
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}: {err:?}", started.elapsed());
    assert!(err.message.contains("before the call started"), "{err:?}");
}

/// Heartbeats (sequence 0) anywhere before the terminal event break no order and are not
/// recorded as progress.
#[tokio::test]
async fn heartbeats_stand_outside_the_event_order() {
    let (outcome, reporter) = run("heartbeats").await;
    assert_eq!(outcome.unwrap(), json!({}));
    assert!(reporter.progress().is_empty());
}
