//! [`RemoteExecutor`]: one capability (name and version) on one remote endpoint, run as an
//! [`Executor`]. It sends one `Execute` call per attempt, checks the event order
//! ([`crate::protocol`]), forwards progress and artifacts to the execution's reporter and
//! turns the terminal event into the step's outcome.
//!
//! Failures, classified:
//!
//! | what happened | code | retryable |
//! |---|---|---|
//! | `failed` event | the remote error's code | the remote error's flag |
//! | `cancelled` event, `ctx.cancel` fired, or the reporter lost the lease | `CANCELLED` | no |
//! | `ctx.deadline` passed | `DEADLINE_EXCEEDED` | yes |
//! | connection refused or broken, stream ended before its terminal event | `EXECUTOR_UNAVAILABLE` | yes |
//! | the call did not start, or its stream sent nothing (heartbeats included), for its idle timeout ([`IDLE_HEARTBEATS`] heartbeat intervals; `Cancel` sent on a stream) | `EXECUTOR_UNAVAILABLE` | yes |
//! | the server does not implement `rara.v1` (`UNIMPLEMENTED`) | `EXECUTOR_UNAVAILABLE` | no |
//! | events out of order, bad sequence numbers, output that is not JSON | `PROTOCOL_VIOLATION` | no |
//!
//! Detachable capabilities (DESIGN.md "Long steps"): the request says `detachable`, and when
//! `ctx.detach.park` fires the client stops reading the events between two of them (never
//! while one is being recorded) and lets go of the call *without* `Cancel`: the attempt goes
//! on remotely, and `ctx.detach` knows where it runs and the last event recorded. With
//! `ctx.detach.resume` the client calls `Attach` instead of `Execute` and goes on from the
//! event after the one recorded. At re-attach:
//!
//! | what happened | code | retryable |
//! |---|---|---|
//! | `NOT_FOUND`: the executor lost the attempt (restart, retention) | `ATTEMPT_NOT_FOUND` | yes (a new attempt) |
//! | `FAILED_PRECONDITION`: an older fence, or a sequence beyond the attempt's | `ATTACH_REFUSED` | yes |
//! | the endpoint cannot be reached, or `Attach` does not start within the idle timeout | parks again (the step's deadline still holds) | — |
//!
//! On cancellation, lease loss and deadline the client sends `Cancel` (best effort, bounded
//! by a short timeout) with the real reason (`ctx.stop_reason`: the operator's, the run
//! cancelled, the lease lost, the deadline) *while the call is still open*, then reads the
//! stream (bounded) so the executor can answer `cancelled`, and only then lets go. Inputs and outputs are never logged: only
//! operation, step id, attempt, fence and endpoint.
//!
//! Heartbeats: every request asks for one per heartbeat interval of quiet
//! ([`RemoteExecutor::with_heartbeat_interval`]); a `heartbeat` event only restarts the idle
//! timer. It stands outside the event order (sequence 0) and is never recorded.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use rara_domain::StepError;
use rara_domain::executor::{Artifact, ExecutionContext, Executor, ReportError};
use rara_domain::step_error::codes;
use tokio::time::Instant;
use tonic::transport::Channel;
use tonic::{Code, Status};
use tracing::Instrument;

use crate::pb::execute_response::Event;
use crate::pb::executor_service_client::ExecutorServiceClient;
use crate::pb::{self};
use crate::protocol::EventOrder;
use crate::transport::{HEARTBEAT_INTERVAL, IDLE_HEARTBEATS};

/// How long a best-effort `Cancel` may take before the client gives up on it.
pub const DEFAULT_CANCEL_TIMEOUT: Duration = Duration::from_secs(2);
/// After the terminal event, how long the client waits for the stream to end (anything but
/// the end is a protocol violation; a stream that stays open is left behind with a warning).
pub const END_OF_STREAM_GRACE: Duration = Duration::from_secs(2);
/// The gRPC deadline of an `Execute` or `Attach` call is the attempt's deadline plus this: the
/// time the executor has to report `failed` DEADLINE_EXCEEDED (or `cancelled` after rara's
/// `Cancel`) before the call itself expires (proto: `ExecuteRequest.deadline`).
pub const DEADLINE_GRACE: Duration = Duration::from_secs(2);
/// The wait for the end of the stream stops this long before the deadline, so a finished
/// attempt is not reported as late.
const DEADLINE_MARGIN: Duration = Duration::from_millis(50);

/// One capability on one remote executor.
#[derive(Debug, Clone)]
pub struct RemoteExecutor {
    client: ExecutorServiceClient<Channel>,
    endpoint: Arc<str>,
    operation: String,
    version: String,
    cancel_timeout: Duration,
    /// The capability advertises `detachable`: its attempts may outlive the call.
    detachable: bool,
    /// Asked of the executor in every request; zero: no heartbeats and no idle timeout.
    heartbeat_interval: Duration,
}

/// Why a call stopped before its stream gave an outcome.
#[derive(Debug, Clone, Copy)]
enum Stop {
    Cancelled,
    LeaseLost,
    Deadline,
}

impl Stop {
    fn reason(self) -> &'static str {
        match self {
            Self::Cancelled => "the step was cancelled",
            Self::LeaseLost => "rara lost the step's lease",
            Self::Deadline => "the attempt's deadline passed",
        }
    }
}

/// How a stream ended without a result to return as is.
#[derive(Debug)]
enum Interrupted {
    Failed(StepError),
    LeaseLost,
    /// The invocation ends: the client let go of a detachable attempt, which goes on.
    Parked,
}

impl RemoteExecutor {
    /// Runs `operation` at `version` on the executor behind `channel`. `endpoint` names it in
    /// errors and logs (no credentials). The channel is shared: cloning it is cheap.
    pub fn new(
        channel: Channel,
        endpoint: impl Into<Arc<str>>,
        operation: impl Into<String>,
        version: impl Into<String>,
    ) -> Self {
        Self {
            client: ExecutorServiceClient::new(channel),
            endpoint: endpoint.into(),
            operation: operation.into(),
            version: version.into(),
            cancel_timeout: DEFAULT_CANCEL_TIMEOUT,
            detachable: false,
            heartbeat_interval: HEARTBEAT_INTERVAL,
        }
    }

    /// The heartbeat interval asked of the executor (default [`HEARTBEAT_INTERVAL`]): a
    /// stream that sends nothing, heartbeats included, for [`IDLE_HEARTBEATS`] of them is
    /// given up as a retryable `EXECUTOR_UNAVAILABLE`. Zero turns both off (an executor
    /// that predates heartbeats).
    pub fn with_heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = interval;
        self
    }

    /// Whether the capability advertises `detachable` (its attempts may outlive the call).
    pub fn with_detachable(mut self, detachable: bool) -> Self {
        self.detachable = detachable;
        self
    }

    /// How long a best-effort `Cancel` may take (default [`DEFAULT_CANCEL_TIMEOUT`]).
    pub fn with_cancel_timeout(mut self, timeout: Duration) -> Self {
        self.cancel_timeout = timeout;
        self
    }

    pub fn operation(&self) -> &str {
        &self.operation
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn request(
        &self,
        ctx: &ExecutionContext,
        input: &serde_json::Value,
        remaining: Duration,
        trace_context: HashMap<String, String>,
    ) -> pb::ExecuteRequest {
        pb::ExecuteRequest {
            run_id: ctx.run_id.to_string(),
            step_id: ctx.step_id.to_string(),
            attempt: ctx.attempt,
            fence: ctx.fence,
            map_index: ctx.map_index,
            operation: self.operation.clone(),
            // The pinned version, or empty for an unpinned step: the executor runs its newest
            // (the router's cached view of versions may be older than the executor's).
            capability_version: ctx.version.clone().unwrap_or_default(),
            input_json: input.to_string(),
            deadline: Some(prost_types::Timestamp::from(SystemTime::now() + remaining)),
            trace_context,
            detachable: self.detachable,
            heartbeat_interval_ms: self.heartbeat_interval_ms(),
        }
    }

    fn heartbeat_interval_ms(&self) -> u32 {
        u32::try_from(self.heartbeat_interval.as_millis()).unwrap_or(u32::MAX)
    }

    /// Waits for the stream's next message for at most the idle timeout; past it the
    /// stream is broken: `Cancel` (best effort, unless sent already) and a retryable
    /// `EXECUTOR_UNAVAILABLE`.
    async fn next_or_idle(
        &self,
        ctx: &ExecutionContext,
        events: &mut tonic::Streaming<pb::ExecuteResponse>,
        seen: u64,
        cancel_sent: &AtomicBool,
    ) -> Result<Result<Option<pb::ExecuteResponse>, Status>, Interrupted> {
        let idle = match self.within_idle(events.message()).await {
            Ok(next) => return Ok(next),
            Err(idle) => idle,
        };
        tracing::warn!(step_id = %ctx.step_id, attempt = ctx.attempt, endpoint = %self.endpoint, idle_ms = idle.as_millis() as u64, "remote stream idle; giving it up");
        if !cancel_sent.swap(true, Ordering::SeqCst) {
            self.send_cancel(ctx, "the stream sent nothing for longer than its idle timeout").await;
        }
        Err(Interrupted::Failed(self.idle(idle, &format!("after {seen} event(s)"))))
    }

    /// Runs `call` for at most the idle timeout (`Err`: the timeout, which passed).
    async fn within_idle<F: Future>(&self, call: F) -> Result<F::Output, Duration> {
        if self.heartbeat_interval.is_zero() {
            return Ok(call.await);
        }
        let idle = self.heartbeat_interval * IDLE_HEARTBEATS;
        tokio::time::timeout(idle, call).await.map_err(|_| idle)
    }

    /// The retryable `EXECUTOR_UNAVAILABLE` of a call silent for its idle timeout.
    fn idle(&self, idle: Duration, when: &str) -> StepError {
        let message = format!(
            "remote executor {} for {}: the stream sent nothing for {} ms ({IDLE_HEARTBEATS} heartbeat intervals) {when}",
            self.endpoint,
            self.operation,
            idle.as_millis(),
        );
        StepError::retryable(codes::EXECUTOR_UNAVAILABLE, message).with_details(
            serde_json::json!({ "endpoint": &*self.endpoint, "idle_timeout_ms": idle.as_millis() as u64 }),
        )
    }

    async fn execute_attempt(
        &self,
        ctx: &ExecutionContext,
        input: serde_json::Value,
    ) -> Result<serde_json::Value, StepError> {
        if ctx.cancel.is_cancelled() {
            return Err(self.stopped(Stop::Cancelled));
        }
        let remaining = ctx.deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(self.stopped(Stop::Deadline));
        }
        // One `Cancel` per attempt, by whichever path finds out first.
        let cancel_sent = AtomicBool::new(false);
        let span = self.call_span(ctx);
        let trace_context = trace_context(&span);
        let call = match &ctx.detach.resume {
            Some(resume) => Call::Attach(pb::AttachRequest {
                step_id: ctx.step_id.to_string(),
                attempt: ctx.attempt,
                fence: ctx.fence,
                after_sequence: resume.sequence,
                heartbeat_interval_ms: self.heartbeat_interval_ms(),
                trace_context,
            }),
            None => Call::Execute(self.request(ctx, &input, remaining, trace_context)),
        };
        drop(input);
        let stream = self.stream(ctx, call, &cancel_sent).instrument(span);
        tokio::pin!(stream);
        let stop = tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => Stop::Cancelled,
            () = tokio::time::sleep_until(ctx.deadline) => Stop::Deadline,
            outcome = &mut stream => match outcome {
                Ok(output) => return Ok(output),
                Err(Interrupted::Failed(err)) => return Err(err),
                // The stream sent `Cancel` itself, before it let go of the call.
                Err(Interrupted::LeaseLost) => return Err(self.stopped(Stop::LeaseLost)),
                // No `Cancel`: the attempt goes on, and `ctx.detach` says where.
                Err(Interrupted::Parked) => return Err(self.parked(ctx)),
            },
        };
        // `Cancel` first, while the call is still open; then let the stream run (bounded)
        // so the executor can answer with its `cancelled` event.
        if !cancel_sent.swap(true, Ordering::SeqCst) {
            self.send_cancel(ctx, ctx.stop_reason.get().unwrap_or(stop.reason())).await;
        }
        if tokio::time::timeout(self.cancel_timeout, &mut stream).await.is_err() {
            tracing::warn!(step_id = %ctx.step_id, endpoint = %self.endpoint, "no cancelled event after Cancel");
        }
        Err(self.stopped(stop))
    }

    /// The client span of the attempt's call (RPC conventions; ids only), under the step's
    /// span: its context travels in the request's `trace_context`.
    fn call_span(&self, ctx: &ExecutionContext) -> tracing::Span {
        let method = if ctx.detach.resume.is_some() { "Attach" } else { "Execute" };
        tracing::info_span!(
            "grpc",
            otel.name = format!("rara.v1.Executor/{method}"),
            otel.kind = "client",
            rpc.system = "grpc",
            rpc.service = "rara.v1.Executor",
            rpc.method = method,
            server.address = %self.endpoint,
            rara.run_id = %ctx.run_id,
            rara.step_id = %ctx.step_id,
            rara.operation = %self.operation,
            rara.attempt = %ctx.attempt,
            rara.fence = %ctx.fence,
        )
    }

    /// Opens the call: `Execute` for a new attempt, `Attach` to resume a detached one.
    /// Both carry a gRPC deadline: the attempt's, plus [`DEADLINE_GRACE`].
    async fn open(
        &self,
        call: Call,
        deadline: Instant,
    ) -> Result<(tonic::Streaming<pb::ExecuteResponse>, EventOrder), Interrupted> {
        let mut client = self.client.clone();
        let timeout = deadline.saturating_duration_since(Instant::now()) + DEADLINE_GRACE;
        match call {
            // A call that does not even start (no response headers) is as silent as a stream.
            Call::Execute(request) => {
                let events = self
                    .within_idle(client.execute(with_timeout(request, timeout)))
                    .await
                    .map_err(|idle| Interrupted::Failed(self.idle(idle, "before the call started")))?
                    .map_err(|status| Interrupted::Failed(self.unavailable(&status, "the call could not start")))?;
                Ok((events.into_inner(), EventOrder::new()))
            }
            Call::Attach(request) => {
                let after = request.after_sequence;
                match self.within_idle(client.attach(with_timeout(request, timeout))).await {
                    Ok(Ok(events)) => Ok((events.into_inner(), EventOrder::resume(after))),
                    Ok(Err(status)) => Err(self.attach_refused(&status)),
                    Err(idle) => {
                        tracing::warn!(
                            endpoint = %self.endpoint, idle_ms = idle.as_millis() as u64,
                            "re-attaching did not start within the idle timeout; the attempt stays detached and is tried again later"
                        );
                        Err(Interrupted::Parked)
                    }
                }
            }
        }
    }

    /// What a refused `Attach` means: the attempt is lost (a new one runs), this holder is
    /// refused, or the executor cannot be reached now (park again: the attempt may still run).
    fn attach_refused(&self, status: &Status) -> Interrupted {
        let refused = |code: &str, what: &str| {
            Interrupted::Failed(
                self.located(
                    StepError::retryable(code, format!("{what}: {}", status.message()))
                        .with_details(serde_json::json!({ "grpc_code": format!("{:?}", status.code()) })),
                ),
            )
        };
        match status.code() {
            Code::NotFound => refused(
                codes::ATTEMPT_NOT_FOUND,
                "the remote executor no longer knows the detached attempt; a new attempt runs",
            ),
            Code::FailedPrecondition | Code::InvalidArgument => {
                refused(codes::ATTACH_REFUSED, "the remote executor refused to re-attach")
            }
            Code::Unimplemented => Interrupted::Failed(self.unavailable(status, "re-attaching is not supported")),
            _ => {
                tracing::warn!(
                    endpoint = %self.endpoint, code = ?status.code(), status = status.message(),
                    "could not re-attach; the attempt stays detached and is tried again later"
                );
                Interrupted::Parked
            }
        }
    }

    /// A report found the lease gone: send `Cancel` while the call is still open (unless it
    /// was sent already), then read the stream (bounded) until the executor's terminal
    /// event, so it can answer `cancelled`.
    async fn cancel_then_drain(
        &self,
        ctx: &ExecutionContext,
        events: &mut tonic::Streaming<pb::ExecuteResponse>,
        cancel_sent: &AtomicBool,
    ) {
        if !cancel_sent.swap(true, Ordering::SeqCst) {
            self.send_cancel(ctx, ctx.stop_reason.get().unwrap_or(Stop::LeaseLost.reason())).await;
        }
        let drain = async {
            while let Ok(Some(event)) = events.message().await {
                if matches!(event.event, Some(Event::Succeeded(_) | Event::Failed(_) | Event::Cancelled(_))) {
                    return;
                }
            }
        };
        if tokio::time::timeout(self.cancel_timeout, drain).await.is_err() {
            tracing::warn!(step_id = %ctx.step_id, endpoint = %self.endpoint, "no terminal event after Cancel");
        }
    }

    /// Runs the call to its terminal event (and the end of the stream after it). A detachable
    /// attempt is parked between two events when `ctx.detach.park` fires.
    async fn stream(
        &self,
        ctx: &ExecutionContext,
        call: Call,
        cancel_sent: &AtomicBool,
    ) -> Result<serde_json::Value, Interrupted> {
        let (mut events, mut order) = self.open(call, ctx.deadline).await?;
        if self.detachable {
            ctx.detach.runs_on(&self.endpoint);
        }
        let mut outcome: Option<Result<serde_json::Value, StepError>> = None;
        loop {
            if self.detachable && outcome.is_none() && ctx.detach.park.is_cancelled() {
                return Err(Interrupted::Parked);
            }
            let next = if outcome.is_some() {
                // Wait for the end, but give up a little before the deadline: the outcome is in.
                let until = (Instant::now() + END_OF_STREAM_GRACE)
                    .min(ctx.deadline.checked_sub(DEADLINE_MARGIN).unwrap_or(ctx.deadline));
                match tokio::time::timeout_at(until, events.message()).await {
                    Ok(next) => next,
                    Err(_) => {
                        tracing::warn!(endpoint = %self.endpoint, "stream stayed open after its terminal event");
                        break;
                    }
                }
            } else if self.detachable {
                tokio::select! {
                    next = self.next_or_idle(ctx, &mut events, order.seen(), cancel_sent) => next?,
                    () = ctx.detach.park.cancelled() => return Err(Interrupted::Parked),
                }
            } else {
                self.next_or_idle(ctx, &mut events, order.seen(), cancel_sent).await?
            };
            let event = match next {
                Ok(Some(event)) => event,
                Ok(None) => {
                    order.finish().map_err(|err| Interrupted::Failed(self.located(err)))?;
                    break;
                }
                Err(status) if outcome.is_some() => {
                    tracing::warn!(endpoint = %self.endpoint, code = ?status.code(), "stream broke after its terminal event");
                    break;
                }
                Err(status) => {
                    let when = format!("the stream broke after {} event(s)", order.seen());
                    return Err(Interrupted::Failed(self.unavailable(&status, &when)));
                }
            };
            if matches!(event.event, Some(Event::Heartbeat(_))) {
                // Outside the order: it only restarted the idle timer.
                continue;
            }
            order.check(&event).map_err(|err| Interrupted::Failed(self.located(err)))?;
            let sequence = event.sequence;
            match event.event {
                Some(Event::Running(running)) if !running.capability_version.is_empty() => {
                    if let Err(lost) = report(ctx.reporter.version(&running.capability_version).await) {
                        self.cancel_then_drain(ctx, &mut events, cancel_sent).await;
                        return Err(lost);
                    }
                }
                Some(Event::Accepted(_) | Event::Running(_) | Event::Heartbeat(_)) | None => {}
                Some(Event::Progress(progress)) => {
                    let reported = ctx.reporter.progress(fraction(progress.fraction), &progress.message).await;
                    if let Err(lost) = report(reported) {
                        self.cancel_then_drain(ctx, &mut events, cancel_sent).await;
                        return Err(lost);
                    }
                }
                Some(Event::Artifact(artifact)) => {
                    if let Err(lost) = report(ctx.reporter.artifact(artifact_of(artifact)).await) {
                        self.cancel_then_drain(ctx, &mut events, cancel_sent).await;
                        return Err(lost);
                    }
                }
                Some(Event::Succeeded(succeeded)) => outcome = Some(self.output(&succeeded.output_json)),
                Some(Event::Failed(failed)) => outcome = Some(Err(self.remote_error(failed.error))),
                Some(Event::Cancelled(cancelled)) => {
                    outcome = Some(Err(StepError::permanent(
                        codes::CANCELLED,
                        format!("remote executor {} cancelled {}: {}", self.endpoint, self.operation, cancelled.reason),
                    )))
                }
            }
            // Recorded (progress and artifacts are written above): a re-attach goes on after it.
            ctx.detach.recorded(sequence);
        }
        // Every way out of the loop comes after a terminal event, which sets `outcome`.
        outcome
            .unwrap_or_else(|| {
                Err(self
                    .located(StepError::permanent(codes::PROTOCOL_VIOLATION, "the stream ended without an outcome")))
            })
            .map_err(Interrupted::Failed)
    }

    async fn send_cancel(&self, ctx: &ExecutionContext, reason: &str) {
        let sent =
            crate::cancel::cancel(self.client.clone(), ctx.step_id, ctx.attempt, reason, self.cancel_timeout).await;
        let (step_id, attempt, endpoint) = (ctx.step_id, ctx.attempt, &*self.endpoint);
        match sent {
            Ok(found) => {
                tracing::info!(%step_id, attempt, %endpoint, found, reason, "remote attempt cancelled")
            }
            Err(error) => tracing::warn!(%step_id, attempt, %endpoint, %error, reason, "cancel not answered"),
        }
    }

    /// The contract's output: a JSON object; empty means `{}` (as for `input_json`). Anything
    /// else (not JSON, or JSON that is not an object) is a permanent `PROTOCOL_VIOLATION`.
    fn output(&self, output_json: &str) -> Result<serde_json::Value, StepError> {
        if output_json.trim().is_empty() {
            return Ok(serde_json::json!({}));
        }
        let violation = |what: String| self.located(StepError::permanent(codes::PROTOCOL_VIOLATION, what));
        match serde_json::from_str::<serde_json::Value>(output_json) {
            Ok(output @ serde_json::Value::Object(_)) => Ok(output),
            Ok(other) => Err(violation(format!(
                "the succeeded event's output_json must be a JSON object, not {}",
                json_kind(&other)
            ))),
            Err(err) => Err(violation(format!("the succeeded event's output_json is not JSON ({err})"))),
        }
    }

    fn remote_error(&self, error: Option<pb::Error>) -> StepError {
        let Some(error) = error else {
            return self.located(StepError::permanent(codes::PROTOCOL_VIOLATION, "a failed event carried no error"));
        };
        let details = serde_json::Value::Object(
            error.details.into_iter().map(|(k, v)| (k, serde_json::Value::String(v))).collect(),
        );
        let code = if error.code.is_empty() { "REMOTE_ERROR".to_owned() } else { error.code };
        StepError { code, message: error.message, retryable: error.retryable, details }
    }

    fn unavailable(&self, status: &Status, when: &str) -> StepError {
        let message = format!(
            "remote executor {} for {}: {when}: {:?}: {}",
            self.endpoint,
            self.operation,
            status.code(),
            status.message()
        );
        let error = if status.code() == Code::Unimplemented {
            StepError::permanent(codes::EXECUTOR_UNAVAILABLE, message)
        } else {
            StepError::retryable(codes::EXECUTOR_UNAVAILABLE, message)
        };
        error.with_details(serde_json::json!({
            "endpoint": &*self.endpoint,
            "grpc_code": format!("{:?}", status.code()),
        }))
    }

    /// Names the endpoint and operation in an error this client raised.
    fn located(&self, mut error: StepError) -> StepError {
        error.message = format!("{} ({} on {})", error.message, self.operation, self.endpoint);
        error.with_details(serde_json::json!({ "endpoint": &*self.endpoint, "operation": self.operation }))
    }

    /// The placeholder error of a parked attempt: the runtime reads `ctx.detach` instead.
    fn parked(&self, ctx: &ExecutionContext) -> StepError {
        ctx.detach.let_go();
        tracing::info!(
            step_id = %ctx.step_id, attempt = ctx.attempt, endpoint = %self.endpoint,
            sequence = ctx.detach.resume_point().map_or(0, |r| r.sequence), "remote attempt parked; it goes on detached"
        );
        StepError::retryable(codes::EXECUTOR_UNAVAILABLE, "the attempt was parked before its outcome")
    }

    fn stopped(&self, stop: Stop) -> StepError {
        let error = match stop {
            Stop::Cancelled => {
                StepError::permanent(codes::CANCELLED, "the step was cancelled; the remote attempt was told to stop")
            }
            Stop::LeaseLost => StepError::permanent(
                codes::CANCELLED,
                "the lease was lost while the step ran; the remote attempt was told to stop",
            ),
            Stop::Deadline => StepError::retryable(codes::DEADLINE_EXCEEDED, "the attempt ran past its deadline"),
        };
        self.located(error)
    }
}

/// The call that carries an attempt's events.
#[derive(Debug)]
enum Call {
    Execute(pb::ExecuteRequest),
    Attach(pb::AttachRequest),
}

#[async_trait::async_trait]
impl Executor for RemoteExecutor {
    fn version(&self) -> &str {
        &self.version
    }

    fn detachable(&self) -> bool {
        self.detachable
    }

    async fn execute(&self, ctx: ExecutionContext, input: serde_json::Value) -> Result<serde_json::Value, StepError> {
        tracing::info!(
            operation = %self.operation, version = %self.version, step_id = %ctx.step_id,
            attempt = ctx.attempt, fence = ctx.fence, endpoint = %self.endpoint,
            reattach = ctx.detach.resume.is_some(), "remote execution starts"
        );
        let outcome = self.execute_attempt(&ctx, input).await;
        match &outcome {
            Ok(_) => tracing::info!(
                operation = %self.operation, step_id = %ctx.step_id, attempt = ctx.attempt, fence = ctx.fence,
                "remote execution succeeded"
            ),
            // Parked: not a failure (logged where it was let go).
            Err(_) if ctx.detach.was_let_go() => {}
            Err(err) => tracing::warn!(
                operation = %self.operation, step_id = %ctx.step_id, attempt = ctx.attempt, fence = ctx.fence,
                code = %err.code, retryable = err.retryable, "remote execution failed"
            ),
        }
        outcome
    }
}

/// A reporter's answer: a lost lease stops the execution; a report that could not be
/// recorded is logged and the execution goes on.
fn report(result: Result<(), ReportError>) -> Result<(), Interrupted> {
    match result {
        Ok(()) => Ok(()),
        Err(ReportError::LeaseLost) => Err(Interrupted::LeaseLost),
        Err(err @ ReportError::Unavailable(_)) => {
            tracing::warn!(error = %err, "a report from the remote executor was not recorded");
            Ok(())
        }
    }
}

/// `message` as a request with a gRPC deadline `timeout` from now.
fn with_timeout<T>(message: T, timeout: Duration) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(timeout);
    request
}

/// What kind of JSON value `value` is, for a violation's message (never the value itself).
fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// The contract's fraction, kept within `0.0..=1.0`.
fn fraction(raw: f64) -> f64 {
    if raw.is_nan() { 0.0 } else { raw.clamp(0.0, 1.0) }
}

fn artifact_of(artifact: pb::Artifact) -> Artifact {
    Artifact {
        name: artifact.name,
        uri: artifact.uri,
        media_type: Some(artifact.media_type).filter(|m| !m.is_empty()),
        size_bytes: i64::try_from(artifact.size_bytes).ok(),
        digest: Some(artifact.digest).filter(|d| !d.is_empty()),
    }
}

/// The W3C trace context of `span` (`traceparent`, `tracestate`) for a request's
/// `trace_context`: empty when telemetry is off.
fn trace_context(span: &tracing::Span) -> HashMap<String, String> {
    let mut carrier = HashMap::new();
    let context = tracing_opentelemetry::OpenTelemetrySpanExt::context(span);
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&context, &mut carrier));
    carrier
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_outside_the_contract_are_clamped() {
        assert_eq!(fraction(f64::NAN), 0.0);
        assert_eq!(fraction(-1.0), 0.0);
        assert_eq!(fraction(1.5), 1.0);
        assert_eq!(fraction(0.25), 0.25);
    }

    #[test]
    fn empty_artifact_fields_become_absent() {
        let artifact = artifact_of(pb::Artifact {
            name: "a".into(),
            uri: "file:///a".into(),
            media_type: String::new(),
            size_bytes: u64::MAX,
            digest: String::new(),
        });
        assert_eq!(artifact.media_type, None);
        assert_eq!(artifact.size_bytes, None);
        assert_eq!(artifact.digest, None);
    }

    #[test]
    fn report_errors_stop_only_on_a_lost_lease() {
        assert!(matches!(report(Err(ReportError::LeaseLost)), Err(Interrupted::LeaseLost)));
        assert!(report(Err(ReportError::Unavailable("db".into()))).is_ok());
    }
}
