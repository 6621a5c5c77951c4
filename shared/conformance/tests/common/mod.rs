//! A minimal `rara.v1` executor, written from `proto/rara/v1/executor.proto` alone (not from
//! the Python executor): the conformance capabilities at 1.0.0, none detachable, one task per
//! attempt that watches `Cancel`, the deadline and the call going away; it asks for the
//! bearer [`TOKEN`] on every call and for the attempt's secret on `Cancel` (it never
//! supersedes, so the supersede rule holds by construction). Its [`Flaw`]s break one rule
//! each, on purpose, to prove the suite catches them.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rara_remote::pb::execute_response::Event;
use rara_remote::pb::executor_service_server::{ExecutorService, ExecutorServiceServer};
use rara_remote::pb::{self};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

const VERSION: &str = "1.0.0";

/// The token the minimal executor accepts.
pub const TOKEN: &str = "minimal-executor-token-0001";

/// How the suite calls the minimal executor: with its token (and a key for the secrets).
pub fn security() -> rara_remote::Security {
    rara_remote::Security::default().with_token(TOKEN).unwrap().with_attempt_key("m".repeat(32)).unwrap()
}

/// Refuses a call without `authorization: Bearer TOKEN`, before any handler runs.
fn check_token(request: Request<()>) -> Result<Request<()>, Status> {
    let presented = request.metadata().get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default();
    match same(presented.as_bytes(), format!("Bearer {TOKEN}").as_bytes()) {
        true => Ok(request),
        false => Err(Status::unauthenticated("a valid bearer token is required")),
    }
}

/// Equality in time that does not depend on where the inputs differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A rule the server breaks on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flaw {
    /// `conformance.echo` sends `succeeded` right after `accepted`, before `running`.
    SucceedsBeforeRunning,
    /// `Cancel` always answers found=false and cancels nothing.
    CancelNotFound,
    /// An attempt goes on after its call is cancelled.
    IgnoresCallCancellation,
    /// Heartbeats asked for are never sent.
    NoHeartbeats,
    /// Calls without the token are served.
    NoAuth,
    /// `Cancel` ignores the attempt's secret, and an `Execute` stops every other attempt of
    /// its step, vouched for or not.
    IgnoresSecrets,
}

/// A running attempt, as `Cancel` finds it.
#[derive(Debug, Clone)]
struct Stop {
    token: CancellationToken,
    reason: Arc<Mutex<String>>,
    /// The attempt's `attempt_secret`; `Cancel` must present it.
    secret: String,
}

#[derive(Debug, Clone, Default)]
pub struct Minimal {
    flaw: Option<Flaw>,
    attempts: Arc<Mutex<HashMap<(String, u32), Stop>>>,
}

type Sender = mpsc::Sender<Result<pb::ExecuteResponse, Status>>;

/// Numbers and sends one attempt's events.
struct Events {
    tx: Sender,
    sequence: u64,
}

impl Events {
    /// Sends `event`; false when the call went away.
    async fn send(&mut self, event: Event) -> bool {
        self.sequence += 1;
        let timestamp = Some(prost_types::Timestamp::from(SystemTime::now()));
        let response = pb::ExecuteResponse { sequence: self.sequence, timestamp, event: Some(event) };
        self.tx.send(Ok(response)).await.is_ok()
    }

    async fn fail(&mut self, code: &str, message: &str, retryable: bool, details: HashMap<String, String>) {
        let error = pb::Error { code: code.into(), message: message.into(), retryable, details };
        self.send(Event::Failed(pb::Failed { error: Some(error) })).await;
    }

    async fn progress(&mut self, fraction: f64, message: &str) -> bool {
        self.send(Event::Progress(pb::Progress { fraction, message: message.into() })).await
    }
}

/// How an attempt's work ended.
enum End {
    Output(Value, Vec<pb::Artifact>),
    Error(pb::Error),
}

fn capability(name: &str, description: &str) -> pb::Capability {
    pb::Capability {
        name: name.into(),
        version: VERSION.into(),
        description: description.into(),
        input_schema: None,
        detachable: false,
    }
}

#[tonic::async_trait]
impl ExecutorService for Minimal {
    async fn get_capabilities(
        &self,
        _request: Request<pb::GetCapabilitiesRequest>,
    ) -> Result<Response<pb::GetCapabilitiesResponse>, Status> {
        let capabilities = vec![
            capability(rara_conformance::ECHO, "echoes its input"),
            capability(rara_conformance::SLEEP, "sleeps"),
            capability(rara_conformance::FAIL, "fails as told"),
            capability(rara_conformance::CHATTY, "reports progress until stopped"),
        ];
        Ok(Response::new(pb::GetCapabilitiesResponse { capabilities }))
    }

    type ExecuteStream = ReceiverStream<Result<pb::ExecuteResponse, Status>>;

    async fn execute(&self, request: Request<pb::ExecuteRequest>) -> Result<Response<Self::ExecuteStream>, Status> {
        let request = request.into_inner();
        let (tx, rx) = mpsc::channel(64);
        let stop =
            Stop { token: CancellationToken::new(), reason: Arc::default(), secret: request.attempt_secret.clone() };
        let key = (request.step_id.clone(), request.attempt);
        if self.flaw == Some(Flaw::IgnoresSecrets) {
            for (_, other) in self.attempts.lock().unwrap().iter().filter(|(k, _)| k.0 == key.0) {
                other.token.cancel();
            }
        }
        self.attempts.lock().unwrap().insert(key.clone(), stop.clone());
        let (attempts, flaw) = (self.attempts.clone(), self.flaw);
        // Heartbeats when asked: this executor simply sends one every interval until the
        // attempt ends (more often than the contract asks, which is allowed).
        let heartbeats = (request.heartbeat_interval_ms > 0 && flaw != Some(Flaw::NoHeartbeats)).then(|| {
            let (tx, every) = (tx.clone(), Duration::from_millis(request.heartbeat_interval_ms.into()));
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    let beat = pb::ExecuteResponse {
                        sequence: 0,
                        timestamp: None,
                        event: Some(Event::Heartbeat(pb::Heartbeat {})),
                    };
                    if tx.send(Ok(beat)).await.is_err() {
                        return;
                    }
                }
            })
        });
        tokio::spawn(async move {
            attempt(request, Events { tx, sequence: 0 }, stop, flaw).await;
            if let Some(heartbeats) = heartbeats {
                heartbeats.abort();
            }
            attempts.lock().unwrap().remove(&key);
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn cancel(&self, request: Request<pb::CancelRequest>) -> Result<Response<pb::CancelResponse>, Status> {
        let request = request.into_inner();
        if self.flaw == Some(Flaw::CancelNotFound) {
            return Ok(Response::new(pb::CancelResponse { found: false }));
        }
        let stop = self.attempts.lock().unwrap().get(&(request.step_id, request.attempt)).cloned();
        let checks_secret = self.flaw != Some(Flaw::IgnoresSecrets);
        if checks_secret
            && stop.as_ref().is_some_and(|stop| !same(stop.secret.as_bytes(), request.attempt_secret.as_bytes()))
        {
            return Err(Status::permission_denied("attempt_secret is not this attempt's secret"));
        }
        let found = stop.is_some_and(|stop| {
            *stop.reason.lock().unwrap() = request.reason;
            stop.token.cancel();
            true
        });
        Ok(Response::new(pb::CancelResponse { found }))
    }

    type AttachStream = ReceiverStream<Result<pb::ExecuteResponse, Status>>;

    async fn attach(&self, _request: Request<pb::AttachRequest>) -> Result<Response<Self::AttachStream>, Status> {
        Err(Status::unimplemented("no capability here is detachable"))
    }
}

/// One attempt, from `accepted` to its terminal event (or until its call goes away).
async fn attempt(request: pb::ExecuteRequest, mut events: Events, stop: Stop, flaw: Option<Flaw>) {
    if !events.send(Event::Accepted(pb::Accepted {})).await {
        return;
    }
    let known = [rara_conformance::ECHO, rara_conformance::SLEEP, rara_conformance::FAIL, rara_conformance::CHATTY];
    let offered = known.contains(&request.operation.as_str())
        && (request.capability_version.is_empty() || request.capability_version == VERSION);
    // Every refusal still says `running` first: the order is the same on every stream.
    let refuse = |code: &'static str, message: String, retryable: bool| (code, message, retryable);
    let refusal = if uuid::Uuid::parse_str(&request.step_id).is_err() || request.attempt == 0 {
        Some(refuse("INVALID_REQUEST", "step_id must be a UUID and attempt at least 1".into(), false))
    } else if !offered {
        let message = format!("{} {:?} is not offered here", request.operation, request.capability_version);
        Some(refuse("UNKNOWN_OPERATION", message, false))
    } else {
        None
    };
    let input =
        match serde_json::from_str::<Value>(if request.input_json.is_empty() { "{}" } else { &request.input_json }) {
            Ok(input @ Value::Object(_)) => Some(input),
            _ => None,
        };
    let deadline = request.deadline.and_then(|d| SystemTime::try_from(d).ok());
    let left = deadline.map(|d| d.duration_since(SystemTime::now()).unwrap_or_default());
    let refusal = refusal
        .or_else(|| input.is_none().then(|| refuse("INVALID_INPUT", "input_json must be a JSON object".into(), false)))
        .or_else(|| {
            left.is_some_and(|l| l.is_zero()).then(|| refuse("DEADLINE_EXCEEDED", "the deadline passed".into(), true))
        });
    if flaw == Some(Flaw::SucceedsBeforeRunning) && request.operation == rara_conformance::ECHO && refusal.is_none() {
        let output_json = json!({ "echo": input }).to_string();
        events.send(Event::Succeeded(pb::Succeeded { output_json, artifacts: vec![] })).await;
        return;
    }
    // The version that runs; none for a refusal (nothing runs).
    let capability_version = if refusal.is_none() { VERSION.into() } else { String::new() };
    if !events.send(Event::Running(pb::Running { capability_version })).await {
        return;
    }
    if let Some((code, message, retryable)) = refusal {
        events.fail(code, &message, retryable, HashMap::new()).await;
        return;
    }
    let input = input.unwrap_or_default();
    let gone = events.tx.clone();
    let watch_call = flaw != Some(Flaw::IgnoresCallCancellation);
    let end = tokio::select! {
        biased;
        () = stop.token.cancelled() => {
            let reason = stop.reason.lock().unwrap().clone();
            events.send(Event::Cancelled(pb::Cancelled { reason })).await;
            return;
        }
        () = gone.closed(), if watch_call => return,
        () = until(left) => {
            events.fail("DEADLINE_EXCEEDED", "the attempt's deadline passed", true, HashMap::new()).await;
            return;
        }
        end = work(&request.operation, input, &mut events) => end,
    };
    match end {
        End::Output(output, artifacts) => {
            let succeeded = pb::Succeeded { output_json: output.to_string(), artifacts };
            events.send(Event::Succeeded(succeeded)).await;
        }
        End::Error(error) => {
            events.send(Event::Failed(pb::Failed { error: Some(error) })).await;
        }
    }
}

async fn until(left: Option<Duration>) {
    match left {
        Some(left) => tokio::time::sleep(left).await,
        None => std::future::pending().await,
    }
}

/// The capability's own work. Progress that cannot be sent (the call went away) does not stop
/// it: stopping is the attempt's job.
async fn work(operation: &str, input: Value, events: &mut Events) -> End {
    match operation {
        rara_conformance::ECHO => {
            events.progress(0.5, "echoing").await;
            let artifact = pb::Artifact {
                name: "echo.json".into(),
                uri: "memory://minimal/echo.json".into(),
                media_type: "application/json".into(),
                size_bytes: input.to_string().len() as u64,
                digest: String::new(),
            };
            events.send(Event::Artifact(artifact.clone())).await;
            End::Output(json!({ "echo": input }), vec![artifact])
        }
        rara_conformance::SLEEP => {
            let seconds = input.get("seconds").and_then(Value::as_f64).unwrap_or(0.0).clamp(0.0, 3600.0);
            let total = Duration::from_secs_f64(seconds);
            let started = tokio::time::Instant::now();
            while started.elapsed() < total {
                events.progress(started.elapsed().as_secs_f64() / seconds, "sleeping").await;
                tokio::time::sleep(Duration::from_millis(200).min(total.saturating_sub(started.elapsed()))).await;
            }
            End::Output(json!({ "slept_seconds": seconds }), vec![])
        }
        rara_conformance::FAIL => {
            let text = |key: &str| input.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
            let details = input
                .get("details")
                .and_then(Value::as_object)
                .map(|d| d.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())).collect())
                .unwrap_or_default();
            End::Error(pb::Error {
                code: text("code"),
                message: text("message"),
                retryable: input.get("retryable").and_then(Value::as_bool).unwrap_or(false),
                details,
            })
        }
        _ => {
            // conformance.chatty: progress every 5 ms until stopped.
            let mut tick = 0u64;
            loop {
                events.progress((tick % 100) as f64 / 100.0, "chatty").await;
                tick += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
}

/// Starts the minimal executor (with `flaw`, if any) and its health service on 127.0.0.1:0;
/// it lives as long as the test's runtime. Returns its `http://` URL.
pub async fn start(flaw: Option<Flaw>) -> String {
    let service = Minimal { flaw, attempts: Arc::default() };
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<ExecutorServiceServer<Minimal>>().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(health_service)
            .add_service(ExecutorServiceServer::with_interceptor(service, move |request| match flaw {
                Some(Flaw::NoAuth) => Ok(request),
                _ => check_token(request),
            }))
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    format!("http://{addr}")
}
