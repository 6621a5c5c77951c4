//! With tracing off (no OTLP endpoint: rara exports nothing), a run's trace context still
//! reaches every participant (issue 51; W3C Trace Context: a participant propagates the
//! context it does not record): the SQS message carries the run's `traceparent`, and every
//! attempt's `ExecuteRequest.trace_context` is in the run's trace, with the run's sampled flag
//! and the attempt's span id. The executors are a `rara.v1` server written from the proto alone,
//! on 127.0.0.1:0, and the real Python executor exporting its own spans to an OTLP receiver; the
//! scheduler and executor runners run on Postgres and LocalStack's SQS.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use rara_domain::workflow::{Format, WorkflowDefinition};
use rara_queue::Queue;
use rara_remote::pb;
use rara_remote::pb::execute_response::Event;
use rara_remote::pb::executor_service_server::{ExecutorService, ExecutorServiceServer};
use rara_runtime::telemetry;
use sqlx::PgPool;
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status};

const LIMIT: Duration = Duration::from_secs(60);
/// One remote step that fails its first attempt (retryably) and succeeds on its second.
const WORKFLOW: &str = "name: traced\nsteps:\n  - name: flaky\n    operation: outside.flaky\n    max_attempts: 3\n    \
                        retry: {initial_delay_seconds: 1, max_delay_seconds: 1}\n";

/// What the outsider was sent: per run id, each attempt's number and `trace_context`.
type Seen = Arc<Mutex<HashMap<String, Vec<(u32, HashMap<String, String>)>>>>;

/// A `rara.v1` executor that knows only the proto: `outside.flaky` fails attempt 1 and
/// succeeds after; every `Execute` request's attempt and `trace_context` is kept.
#[derive(Clone, Default)]
struct Outsider {
    seen: Seen,
}

fn event(sequence: u64, event: Event) -> Result<pb::ExecuteResponse, Status> {
    Ok(pb::ExecuteResponse { sequence, timestamp: None, event: Some(event) })
}

#[tonic::async_trait]
impl ExecutorService for Outsider {
    async fn get_capabilities(
        &self,
        _: Request<pb::GetCapabilitiesRequest>,
    ) -> Result<Response<pb::GetCapabilitiesResponse>, Status> {
        let flaky = pb::Capability { name: "outside.flaky".into(), version: "1.0.0".into(), ..Default::default() };
        Ok(Response::new(pb::GetCapabilitiesResponse { capabilities: vec![flaky] }))
    }

    type ExecuteStream = ReceiverStream<Result<pb::ExecuteResponse, Status>>;

    async fn execute(&self, request: Request<pb::ExecuteRequest>) -> Result<Response<Self::ExecuteStream>, Status> {
        let request = request.into_inner();
        self.seen.lock().unwrap().entry(request.run_id).or_default().push((request.attempt, request.trace_context));
        let end = if request.attempt == 1 {
            let error =
                pb::Error { code: "FLAKY".into(), message: "once".into(), retryable: true, ..Default::default() };
            Event::Failed(pb::Failed { error: Some(error) })
        } else {
            Event::Succeeded(pb::Succeeded { output_json: r#"{"ok":true}"#.into(), artifacts: vec![] })
        };
        let (tx, rx) = mpsc::channel(4);
        for (sequence, e) in
            [(1, Event::Accepted(pb::Accepted {})), (2, Event::Running(pb::Running::default())), (3, end)]
        {
            tx.send(event(sequence, e)).await.unwrap();
        }
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

impl Outsider {
    /// Serves on 127.0.0.1:0 (bound before this returns); its URL.
    async fn start(&self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(ExecutorServiceServer::new(self.clone()))
                .serve_with_incoming(TcpListenerStream::new(listener)),
        );
        url
    }
}

/// A fresh run context with the sampled flag `flags` (`01` sampled, `00` not).
fn run_context(flags: &str) -> String {
    let fresh = telemetry::new_traceparent(None);
    format!("{}-{flags}", &fresh[..fresh.len() - 3])
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn with_tracing_off_every_attempt_reaches_the_executor_in_its_runs_trace(pool: PgPool) {
    assert!(!telemetry::enabled(), "this test binary exports nothing");
    let outsider = Outsider::default();
    let url = outsider.start().await;
    let (store, _queues, stack) = Stack::fresh(pool, &[("RARA_REMOTE_EXECUTORS", &url)]).await;
    let plan = WorkflowDefinition::parse(WORKFLOW, Format::Yaml).unwrap().plan(&stack.settings.core).unwrap();
    for flags in ["01", "00"] {
        let context = run_context(flags);
        let run = telemetry::parse_traceparent(&context).unwrap();
        let run_id = store.submit_traced(&plan, Some(&context)).await.unwrap().run_id;

        // The scheduler's message carries the run's context; it is put back for the runners.
        assert_eq!(stack.scheduler().pass().await.unwrap().sent, 1);
        let received = eventually("the step's message", || async {
            stack.queue.receive(1, Duration::from_secs(1)).await.unwrap().pop()
        })
        .await;
        assert_eq!(received.traceparent.as_deref(), Some(context.as_str()), "the SQS message's traceparent");
        stack.queue.change_visibility(&received.receipt_handle, Duration::ZERO).await.unwrap();

        let (status, counters) = stack.run_until_finished(run_id, LIMIT).await;
        assert_eq!((status.as_str(), counters.retried), ("succeeded", 1), "{counters:?}");
        let step_id = store.run(run_id).await.unwrap().steps[0].id;
        let seen = outsider.seen.lock().unwrap().get(&run_id.to_string()).cloned().unwrap_or_default();
        let attempts: Vec<u32> = seen.iter().map(|(attempt, _)| *attempt).collect();
        assert_eq!(attempts, [1, 2], "one request per attempt");
        for (attempt, trace_context) in seen {
            let traceparent = trace_context.get("traceparent").unwrap_or_else(|| {
                panic!("attempt {attempt} (flags {flags}) came without a traceparent: {trace_context:?}")
            });
            let expected =
                format!("00-{}-{}-{flags}", run.trace_id(), telemetry::attempt_span_id(step_id, attempt as i32));
            assert_eq!(
                traceparent, &expected,
                "attempt {attempt}: the run's trace, the attempt's span, the run's flag"
            );
        }
    }
}

/// The issue's outsider with the real Python executor: rara exports nothing, Python exports its
/// spans to an OTLP receiver, and each attempt's server span is in the run's trace, under the
/// attempt's span id (before, each attempt started a trace of its own).
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn with_tracing_off_the_python_executors_spans_are_in_the_runs_trace(pool: PgPool) {
    assert!(!telemetry::enabled(), "this test binary exports nothing");
    let receiver = rara_testkit::otlp::OtlpReceiver::start().await;
    let python = rara_testkit::python::PythonServer::start_with_env(
        0,
        &[
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", receiver.http_traces_url()),
            ("OTEL_SERVICE_NAME", "outsider"),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );
    let (store, _queues, stack) = Stack::fresh(pool, &[("RARA_REMOTE_EXECUTORS", python.url())]).await;
    let workflow = r#"{"name": "python", "steps": [
        {"name": "stats", "operation": "text.stats", "input": {"text": "one two\nthree"}},
        {"name": "split", "operation": "dataset.split", "depends_on": ["stats"],
         "input": {"rows": [{"id": 1}, {"id": 2}], "ratios": {"a": 0.5, "b": 0.5}, "seed": 7}}
    ]}"#;
    let run_id = submit(&store, &stack.settings, workflow).await;
    let (status, _) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "succeeded");
    let run = telemetry::parse_traceparent(&store.run_trace(run_id).await.unwrap().unwrap()).unwrap();
    let steps = store.run(run_id).await.unwrap().steps;
    let server_span_of = |step_id: String| {
        move |s: &rara_testkit::otlp::ReceivedSpan| {
            s.service == "outsider" && s.kind == 2 && s.attribute("rara.step_id") == Some(&*step_id)
        }
    };
    let spans = receiver
        .wait_for(LIMIT, |spans| steps.iter().all(|step| spans.iter().any(server_span_of(step.id.to_string()))))
        .await
        .unwrap_or_else(|| panic!("Python's server spans did not arrive: {:#?}\n{}", receiver.spans(), python.log()));
    for step in &steps {
        let server: Vec<_> = spans.iter().filter(|s| server_span_of(step.id.to_string())(s)).collect();
        let [server] = server.as_slice() else { panic!("one server span for {}: {server:#?}", step.name) };
        let attempt = telemetry::attempt_span_id(step.id, 1).to_string();
        assert_eq!(
            (server.trace_id.as_str(), server.parent_span_id.as_str()),
            (run.trace_id().to_string().as_str(), attempt.as_str()),
            "{}: Python continues the run's trace under the attempt",
            step.name
        );
    }
}
