//! One trace per run, checked at a real OTLP receiver (`rara_testkit::otlp`, OTLP/HTTP):
//! the demo workflow (in-process steps, a Python step on the real Python executor, one retry)
//! submitted as `rara submit` does, run by the local scheduler and executor on Postgres +
//! LocalStack's SQS. Every span of the run is in the run's trace, each attempt under the root,
//! the retry linked to the failed attempt, the Python handler's span under the gRPC client
//! span, a timer's and an approval's waits as their attempts with a `rara.wait` span under each,
//! and no input, output, signal payload or secret value in any exported span.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use common::*;
use rara_domain::workflow::{Format, WorkflowDefinition};
use rara_platform::telemetry::{self as platform_telemetry, Config, Protocol};
use rara_runtime::secrets::{self, SecretResolver};
use rara_runtime::telemetry;
use rara_store::waits::{Delivery, Signal};
use rara_testkit::otlp::ReceivedSpan;
use serde_json::json;
use sqlx::PgPool;

const LIMIT: Duration = Duration::from_secs(30);
const SECRET: &str = "tr4ce-s3cret-41c2";
/// Text of the Python step's input, which must not appear in any span.
const INPUT_TEXT: &str = "rara leases steps in Postgres";
/// Text of the approval's payload, which must not appear in any span either.
const APPROVER: &str = "ana-approves-7731";

/// Knows one secret, `trace_token`.
struct Vault;

#[async_trait::async_trait]
impl SecretResolver for Vault {
    async fn resolve(&self, name: &str) -> Result<String, secrets::Error> {
        match name {
            "trace_token" => Ok(SECRET.to_owned()),
            _ => Err(secrets::Error::NotFound { name: name.to_owned() }),
        }
    }
}

fn one<'a>(spans: &'a [ReceivedSpan], what: &str, pick: impl Fn(&ReceivedSpan) -> bool) -> &'a ReceivedSpan {
    let found: Vec<&ReceivedSpan> = spans.iter().filter(|s| pick(s)).collect();
    assert_eq!(found.len(), 1, "exactly one {what}: {found:#?}");
    found[0]
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_demo_run_exports_one_trace_with_attempts_under_the_root_and_the_retry_linked(pool: PgPool) {
    let receiver = OtlpReceiver::start().await;
    platform_telemetry::init("rara-test", &Config::to(receiver.http_traces_url(), Protocol::HttpProtobuf)).unwrap();
    let python = PythonServer::start_with_env(
        0,
        &[
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", receiver.http_traces_url()),
            ("OTEL_SERVICE_NAME", "rara-worker-test"),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );
    let (store, _queues, mut stack) = Stack::fresh(pool, &[("RARA_REMOTE_EXECUTORS", python.url())]).await;
    stack.executor = stack.executor.clone().with_secrets(Arc::new(Vault));

    // The demo, plus a step that reads a secret; submitted as `rara submit` does, continuing
    // the caller's trace.
    let mut yaml = std::fs::read_to_string(repo_root().join("tests/fixtures/demo-four-steps.yaml")).unwrap();
    yaml.push_str("  - name: secretive\n    operation: noop\n    input: { token: { $secret: trace_token } }\n");
    // A timer, then an approval.
    yaml.push_str(
        "  - {name: pause, wait: {seconds: 1}}\n  - {name: approve, depends_on: [pause], wait: {signal: approve}}\n",
    );
    let plan = WorkflowDefinition::parse(&yaml, Format::Yaml).unwrap().plan(&stack.settings.core).unwrap();
    let caller = telemetry::parse_traceparent(&telemetry::new_traceparent(None)).unwrap();
    let context = telemetry::new_traceparent(Some(&caller));
    let started = SystemTime::now();
    store.grant_secret("trace_token", "*", "noop", None).await.unwrap();
    let run_id = store.submit_traced(&plan, Some(&context)).await.unwrap().run_id;
    let run = telemetry::parse_traceparent(&context).unwrap();
    telemetry::emit_run_span(&run, Some(caller.clone()), run_id, &plan.name, started, SystemTime::now());
    assert_eq!(store.run_trace(run_id).await.unwrap().as_deref(), Some(context.as_str()), "stored on the run");

    let signaller = {
        let store = store.clone();
        tokio::spawn(async move {
            let signal = Signal { id: "s1".into(), payload: json!({"approved_by": APPROVER}), reject: None };
            while let Delivery::NotWaiting(_) = store.signal(run_id, "approve", &signal).await.unwrap() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let (status, counters) = stack.run_until_finished(run_id, LIMIT).await;
    signaller.await.unwrap();
    // A wait is traced when the scheduler forgets it, at its wait round after the wait ended.
    stack.scheduler().run(Some(Duration::from_secs(1)), tokio_util::sync::CancellationToken::new()).await.unwrap();
    assert_eq!(status, "succeeded");
    assert_eq!(counters.retried, 1, "{counters:?}");
    platform_telemetry::flush().await;
    let trace_id = run.trace_id().to_string();
    let spans = receiver
        .wait_for(LIMIT, |spans| spans.iter().any(|s| s.name == "rara.handler" && s.trace_id == trace_id))
        .await
        .unwrap_or_else(|| {
            let seen: Vec<(String, String, String, String)> = receiver
                .spans()
                .into_iter()
                .filter(|s| s.name.contains("Exec") || s.name.contains("handler"))
                .map(|s| (s.name, s.trace_id, s.span_id, s.parent_span_id))
                .collect();
            panic!("the Python executor's spans did not arrive; received {seen:?}; its log:\n{}", python.log())
        });

    let ours: Vec<ReceivedSpan> = spans.iter().filter(|s| s.trace_id == trace_id).cloned().collect();
    // Every span that names the run is in its trace.
    for s in &spans {
        if s.attribute("rara.run_id") == Some(&run_id.to_string()) {
            assert_eq!(s.trace_id, trace_id, "{s:#?}");
        }
    }
    let root = one(&ours, "root", |s| s.name == "rara.run");
    assert_eq!(
        (root.span_id.as_str(), root.parent_span_id.as_str()),
        (&*run.span_id().to_string(), &*caller.span_id().to_string())
    );

    let steps: HashMap<String, rara_store::read::StepView> =
        store.run(run_id).await.unwrap().steps.into_iter().map(|s| (s.name.clone(), s)).collect();
    for step in steps.values().filter(|s| !s.operation.starts_with("wait.")) {
        for a in &step.attempts {
            let id = telemetry::attempt_span_id(step.id, a.attempt).to_string();
            let attempt = one(&ours, "attempt span", |s| s.name == "rara.attempt" && s.span_id == id);
            assert_eq!(attempt.parent_span_id, root.span_id, "{} attempt {} under the root", step.name, a.attempt);
            assert_eq!(attempt.attribute("rara.step_id"), Some(&*step.id.to_string()));
            assert_eq!(attempt.attribute("rara.attempt"), Some(&*a.attempt.to_string()));
            assert_eq!(attempt.attribute("rara.fence"), Some(&*a.fence.to_string()));
            assert_eq!(attempt.service, "rara-test");
            for name in ["rara.claim", "rara.execute", "rara.record"] {
                one(&ours, name, |s| s.name == name && s.parent_span_id == id);
            }
            // A first attempt was leased and sent by the scheduler (a retry within the
            // visibility limit comes back on the same message).
            if a.attempt == 1 {
                for name in ["rara.lease", "send rara-steps"] {
                    one(&ours, name, |s| s.name == name && s.parent_span_id == id);
                }
            }
            let previous = (a.attempt > 1)
                .then(|| (trace_id.clone(), telemetry::attempt_span_id(step.id, a.attempt - 1).to_string()));
            assert_eq!(attempt.links, previous.into_iter().collect::<Vec<_>>(), "{} attempt {}", step.name, a.attempt);
        }
    }
    // A wait is its attempt, under the root, and the wait's span under it: what it waited for
    // and what decided it.
    for (name, kind, decided_by) in [("pause", "timer", "timer"), ("approve", "signal", "signal")] {
        let step = &steps[name];
        let id = telemetry::attempt_span_id(step.id, 1).to_string();
        let attempt = one(&ours, "wait attempt span", |s| s.name == "rara.attempt" && s.span_id == id);
        assert_eq!(attempt.parent_span_id, root.span_id, "{name}'s attempt under the root");
        assert_eq!(attempt.attribute("rara.outcome"), Some("succeeded"));
        let wait = one(&ours, "wait span", |s| s.name == "rara.wait" && s.parent_span_id == id);
        assert_eq!(wait.attribute("rara.wait.kind"), Some(kind));
        assert_eq!(wait.attribute("rara.wait.decided_by"), Some(decided_by));
        assert_eq!(wait.attribute("rara.wait.name"), (kind == "signal").then_some("approve"));
        assert!(wait.end_unix_nano >= wait.start_unix_nano + if kind == "timer" { 900_000_000 } else { 0 });
    }
    let flaky = &steps["flaky"];
    assert_eq!(flaky.attempts.len(), 2, "the demo's flaky step is retried once");

    // The Python step: execute → gRPC client → Python server → handler.
    let stats_id = steps["stats"].id.to_string();
    let of_stats = |s: &ReceivedSpan| s.attribute("rara.step_id") == Some(&*stats_id);
    let stats = telemetry::attempt_span_id(steps["stats"].id, 1).to_string();
    let execute = one(&ours, "stats execute", |s| s.name == "rara.execute" && s.parent_span_id == stats);
    let client = one(&ours, "gRPC client", |s| s.name == "rara.v1.Executor/Execute" && of_stats(s));
    assert_eq!((client.parent_span_id.as_str(), client.kind), (execute.span_id.as_str(), 3));
    let server = one(&ours, "Python server", |s| s.service == "rara-worker-test" && s.kind == 2 && of_stats(s));
    assert_eq!(server.parent_span_id, client.span_id, "the Python span continues the request's trace_context");
    let handler = one(&ours, "Python handler", |s| s.name == "rara.handler" && of_stats(s));
    assert_eq!(handler.parent_span_id, server.span_id);

    // Ids only: no input, output or secret value in any exported span.
    let output = steps["stats"].output.as_ref().unwrap().to_string();
    for s in &spans {
        let text = format!("{s:?}");
        assert!(!text.contains(SECRET), "a secret in {s:#?}");
        assert!(!text.contains(INPUT_TEXT), "an input in {s:#?}");
        assert!(!text.contains(&output), "an output in {s:#?}");
        assert!(!text.contains(APPROVER), "a signal's payload in {s:#?}");
    }
}
