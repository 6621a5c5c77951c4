//! Test doubles shared by the integration tests: a reporter that records what it is told,
//! an execution-context factory, and a scripted `rara.v1` server that misbehaves on purpose.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rara_domain::executor::{Artifact, ExecutionContext, ReportError, Reporter};
use rara_remote::pb;
use rara_remote::pb::execute_response::Event;
use rara_remote::pb::executor_service_server::{ExecutorService, ExecutorServiceServer};
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};
use uuid::Uuid;

/// One thing a reporter was told.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    Progress(f64, String),
    Artifact(Artifact),
}

/// Records every report in order; can answer `LeaseLost` to the first progress report.
#[derive(Debug, Default)]
pub struct RecordingReporter {
    reports: Mutex<Vec<Report>>,
    lose_lease_on_progress: bool,
    /// Notified on every report.
    pub reported: Notify,
}

impl RecordingReporter {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn losing_the_lease() -> Arc<Self> {
        Arc::new(Self { lose_lease_on_progress: true, ..Self::default() })
    }

    pub fn reports(&self) -> Vec<Report> {
        self.reports.lock().unwrap().clone()
    }

    pub fn progress(&self) -> Vec<(f64, String)> {
        self.reports()
            .into_iter()
            .filter_map(|r| match r {
                Report::Progress(f, m) => Some((f, m)),
                Report::Artifact(_) => None,
            })
            .collect()
    }

    pub fn artifacts(&self) -> Vec<Artifact> {
        self.reports()
            .into_iter()
            .filter_map(|r| match r {
                Report::Artifact(a) => Some(a),
                Report::Progress(..) => None,
            })
            .collect()
    }

    /// Waits until at least one progress report arrived.
    pub async fn wait_for_progress(&self) {
        tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                let notified = self.reported.notified();
                if !self.progress().is_empty() {
                    return;
                }
                notified.await;
            }
        })
        .await
        .expect("no progress reported within 30 s");
    }
}

#[async_trait::async_trait]
impl Reporter for RecordingReporter {
    async fn progress(&self, fraction: f64, message: &str) -> Result<(), ReportError> {
        self.reports.lock().unwrap().push(Report::Progress(fraction, message.to_owned()));
        self.reported.notify_waiters();
        if self.lose_lease_on_progress { Err(ReportError::LeaseLost) } else { Ok(()) }
    }

    async fn artifact(&self, artifact: Artifact) -> Result<(), ReportError> {
        self.reports.lock().unwrap().push(Report::Artifact(artifact));
        self.reported.notify_waiters();
        Ok(())
    }
}

/// A fresh context for attempt 1 of a new step, due within `within`.
pub fn context(operation: &str, within: Duration, reporter: Arc<RecordingReporter>) -> ExecutionContext {
    ExecutionContext {
        run_id: Uuid::new_v4(),
        step_id: Uuid::new_v4(),
        map_index: None,
        operation: operation.to_owned(),
        version: None,
        attempt: 1,
        fence: 7,
        deadline: Instant::now() + within,
        cancel: CancellationToken::new(),
        stop_reason: Default::default(),
        reporter,
        detach: Default::default(),
    }
}

/// One step of a scripted `Execute` stream.
#[derive(Debug, Clone)]
pub enum Step {
    Send(u64, Event),
    /// An event whose oneof is unset.
    Blank(u64),
    Fail(Status),
    /// Sends numbered progress events every 50 ms until the client goes away.
    ProgressForever(u64),
    /// A `heartbeat` event (sequence 0).
    Heartbeat,
    /// Sends nothing more, the call and its connection kept open, until the client goes
    /// away: a hung executor that still answers keep-alive pings.
    Quiet,
}

pub fn accepted(seq: u64) -> Step {
    Step::Send(seq, Event::Accepted(pb::Accepted {}))
}
pub fn running(seq: u64) -> Step {
    Step::Send(seq, Event::Running(pb::Running::default()))
}
pub fn progress(seq: u64, fraction: f64, message: &str) -> Step {
    Step::Send(seq, Event::Progress(pb::Progress { fraction, message: message.into() }))
}
pub fn succeeded(seq: u64, output_json: &str) -> Step {
    Step::Send(seq, Event::Succeeded(pb::Succeeded { output_json: output_json.into(), artifacts: vec![] }))
}
pub fn failed(seq: u64, code: &str, retryable: bool) -> Step {
    let error = pb::Error {
        code: code.into(),
        message: format!("{code} happened"),
        retryable,
        details: HashMap::from([("where".to_owned(), "scripted".to_owned())]),
    };
    Step::Send(seq, Event::Failed(pb::Failed { error: Some(error) }))
}

/// What a scripted server saw.
#[derive(Debug, Default)]
pub struct Seen {
    pub executes: Mutex<Vec<pb::ExecuteRequest>>,
    /// The `grpc-timeout` header of each `Execute` call, as sent.
    pub execute_timeouts: Mutex<Vec<Option<String>>>,
    pub cancels: Mutex<Vec<pb::CancelRequest>>,
    pub capability_calls: AtomicUsize,
    /// What `GetCapabilities` answers; tests may change it.
    pub capabilities: Mutex<Vec<pb::Capability>>,
    /// When set, `GetCapabilities` answers UNAVAILABLE.
    pub refuse_capabilities: std::sync::atomic::AtomicBool,
    /// The server's standard health service (`grpc.health.v1`); tests may set NOT_SERVING.
    pub health: std::sync::OnceLock<tonic_health::server::HealthReporter>,
}

impl Seen {
    pub fn cancels(&self) -> Vec<pb::CancelRequest> {
        self.cancels.lock().unwrap().clone()
    }

    pub fn capability_calls(&self) -> usize {
        self.capability_calls.load(Ordering::SeqCst)
    }

    pub fn offer(&self, name: &str, version: &str) {
        self.capabilities.lock().unwrap().push(pb::Capability {
            name: name.into(),
            version: version.into(),
            description: format!("{name} {version}"),
            input_schema: None,
            detachable: false,
        });
    }
}

/// A `rara.v1` server whose `Execute` plays the script named by the request's operation.
#[derive(Debug, Clone)]
pub struct Scripted {
    scripts: Arc<HashMap<String, Vec<Step>>>,
    pub seen: Arc<Seen>,
}

#[tonic::async_trait]
impl ExecutorService for Scripted {
    async fn get_capabilities(
        &self,
        _request: Request<pb::GetCapabilitiesRequest>,
    ) -> Result<Response<pb::GetCapabilitiesResponse>, Status> {
        self.seen.capability_calls.fetch_add(1, Ordering::SeqCst);
        if self.seen.refuse_capabilities.load(Ordering::SeqCst) {
            return Err(Status::unavailable("refusing on purpose"));
        }
        let capabilities = self.seen.capabilities.lock().unwrap().clone();
        Ok(Response::new(pb::GetCapabilitiesResponse { capabilities }))
    }

    type ExecuteStream = ReceiverStream<Result<pb::ExecuteResponse, Status>>;

    async fn execute(&self, request: Request<pb::ExecuteRequest>) -> Result<Response<Self::ExecuteStream>, Status> {
        let timeout = request.metadata().get("grpc-timeout").and_then(|v| v.to_str().ok()).map(str::to_owned);
        self.seen.execute_timeouts.lock().unwrap().push(timeout);
        let request = request.into_inner();
        if request.operation == "never_starts" {
            // Accepts the call and never sends its response headers.
            std::future::pending::<()>().await;
        }
        let script = self
            .scripts
            .get(&request.operation)
            .cloned()
            .ok_or_else(|| Status::unimplemented(format!("no script for {}", request.operation)))?;
        self.seen.executes.lock().unwrap().push(request);
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(async move {
            for step in script {
                match step {
                    Step::Send(sequence, event) => {
                        let response = pb::ExecuteResponse { sequence, timestamp: None, event: Some(event) };
                        if tx.send(Ok(response)).await.is_err() {
                            return;
                        }
                    }
                    Step::Blank(sequence) => {
                        let response = pb::ExecuteResponse { sequence, timestamp: None, event: None };
                        if tx.send(Ok(response)).await.is_err() {
                            return;
                        }
                    }
                    Step::Fail(status) => {
                        let _ = tx.send(Err(status)).await;
                        return;
                    }
                    Step::Heartbeat => {
                        let event = Event::Heartbeat(pb::Heartbeat {});
                        let response = pb::ExecuteResponse { sequence: 0, timestamp: None, event: Some(event) };
                        if tx.send(Ok(response)).await.is_err() {
                            return;
                        }
                    }
                    Step::Quiet => {
                        tx.closed().await;
                        return;
                    }
                    Step::ProgressForever(mut sequence) => loop {
                        let event = Event::Progress(pb::Progress { fraction: 0.1, message: "still going".into() });
                        let response = pb::ExecuteResponse { sequence, timestamp: None, event: Some(event) };
                        if tx.send(Ok(response)).await.is_err() {
                            return;
                        }
                        sequence += 1;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    },
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn cancel(&self, request: Request<pb::CancelRequest>) -> Result<Response<pb::CancelResponse>, Status> {
        self.seen.cancels.lock().unwrap().push(request.into_inner());
        Ok(Response::new(pb::CancelResponse { found: true }))
    }

    type AttachStream = ReceiverStream<Result<pb::ExecuteResponse, Status>>;

    /// Scripted attempts never detach: no capability here says `detachable`.
    async fn attach(&self, _request: Request<pb::AttachRequest>) -> Result<Response<Self::AttachStream>, Status> {
        Err(Status::unimplemented("the scripted server runs no detachable capability"))
    }
}

/// Starts a scripted server on 127.0.0.1:0; it lives as long as the test's runtime.
pub async fn start_scripted(scripts: impl IntoIterator<Item = (&'static str, Vec<Step>)>) -> (String, Arc<Seen>) {
    let scripts = scripts.into_iter().map(|(name, steps)| (name.to_owned(), steps)).collect();
    let seen = Arc::new(Seen::default());
    let service = Scripted { scripts: Arc::new(scripts), seen: seen.clone() };
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<ExecutorServiceServer<Scripted>>().await;
    let _ = seen.health.set(health);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(health_service)
            .add_service(ExecutorServiceServer::new(service))
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    (format!("http://{addr}"), seen)
}
