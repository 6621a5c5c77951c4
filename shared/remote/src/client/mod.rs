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
//! | the call did not start, or its stream sent nothing (heartbeats included), for its idle timeout ([`IDLE_HEARTBEATS`](crate::transport::IDLE_HEARTBEATS) heartbeat intervals; `Cancel` sent on a stream) | `EXECUTOR_UNAVAILABLE` | yes |
//! | the server does not implement `rara.v1` (`UNIMPLEMENTED`) | `EXECUTOR_UNAVAILABLE` | no |
//! | events out of order, bad sequence numbers, output that is not JSON | `PROTOCOL_VIOLATION` | no |
//! | an output, an artifact (or their count) or a gRPC message beyond its bound ([`crate::bounds`]) | `OUTPUT_TOO_LARGE` (`Cancel` sent) | no |
//!
//! An error's code, message and details and a progress message beyond their bounds are cut
//! (or replaced by a marker), and a `retry_after_seconds` detail is clamped, as they enter.
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
//! stream (bounded) so the executor can answer `cancelled`, and only then lets go. Inputs and
//! outputs are never logged: only operation, step id, attempt, fence and endpoint.
//!
//! Heartbeats: every request asks for one per interval of quiet ([`RemoteExecutor::with_heartbeat_interval`]);
//! a `heartbeat` event only restarts the idle timer, outside the event order (sequence 0), never recorded.
//!
//! # Layout
//!
//! - this file: [`RemoteExecutor`], its settings, the attempt (`Execute` or `Attach`, the
//!   stop on cancellation, lease loss or deadline) and the request;
//! - `stream`: the call's stream read to its terminal event (event order, reports, idle
//!   timeout, parking);
//! - `failure`: how a call ended without an outcome, and every failure as a classified [`StepError`].

mod failure;
mod stream;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use rara_domain::StepError;
use rara_domain::executor::{ExecutionContext, Executor};
use tokio::time::Instant;
use tonic::transport::Channel;
use tracing::Instrument;

use self::failure::{Interrupted, Stop};
use crate::bounds::Limits;
use crate::pb::{self};
use crate::security::{Client, Security};
use crate::transport::HEARTBEAT_INTERVAL;

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
    client: Client,
    channel: Channel,
    /// The token every call carries and the key of the attempts' secrets.
    security: Arc<Security>,
    endpoint: Arc<str>,
    operation: String,
    version: String,
    cancel_timeout: Duration,
    /// The capability advertises `detachable`: its attempts may outlive the call.
    detachable: bool,
    /// Asked of the executor in every request; zero: no heartbeats and no idle timeout.
    heartbeat_interval: Duration,
    /// What the executor may return ([`crate::bounds`]).
    limits: Limits,
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
        let limits = Limits::default();
        let security = Arc::new(Security::default());
        Self {
            client: security.client(channel.clone()).max_decoding_message_size(limits.max_decoding_message_size()),
            channel,
            security,
            endpoint: endpoint.into(),
            operation: operation.into(),
            version: version.into(),
            cancel_timeout: DEFAULT_CANCEL_TIMEOUT,
            detachable: false,
            heartbeat_interval: HEARTBEAT_INTERVAL,
            limits,
        }
    }

    /// What the executor may return (default [`Limits::default`]); gRPC messages beyond
    /// the output bound plus [`DECODING_SLACK`](crate::bounds::DECODING_SLACK) are not decoded.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.client = self.client.max_decoding_message_size(limits.max_decoding_message_size());
        self.limits = limits;
        self
    }

    /// Sends the token of `security` on every call and the attempts' secrets it derives
    /// (default: no token, [`Security::default`]).
    pub fn with_security(mut self, security: Arc<Security>) -> Self {
        self.client =
            security.client(self.channel.clone()).max_decoding_message_size(self.limits.max_decoding_message_size());
        self.security = security;
        self
    }

    /// The heartbeat interval asked of the executor (default [`HEARTBEAT_INTERVAL`]): a
    /// stream that sends nothing, heartbeats included, for [`IDLE_HEARTBEATS`](crate::transport::IDLE_HEARTBEATS) of them is
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
            attempt_secret: self.security.attempt_secret(ctx.step_id, ctx.attempt),
            prior_attempt_secrets: self.security.prior_attempt_secrets(ctx.step_id, ctx.attempt),
        }
    }

    fn heartbeat_interval_ms(&self) -> u32 {
        u32::try_from(self.heartbeat_interval.as_millis()).unwrap_or(u32::MAX)
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
                attempt_secret: self.security.attempt_secret(ctx.step_id, ctx.attempt),
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

    async fn send_cancel(&self, ctx: &ExecutionContext, reason: &str) {
        let (step_id, attempt, endpoint) = (ctx.step_id, ctx.attempt, &*self.endpoint);
        let secret = self.security.attempt_secret(step_id, attempt);
        let sent =
            crate::cancel::cancel(self.client.clone(), (step_id, attempt, &secret), reason, self.cancel_timeout).await;
        match sent {
            Ok(found) => {
                tracing::info!(%step_id, attempt, %endpoint, found, reason, "remote attempt cancelled")
            }
            Err(error) => tracing::warn!(%step_id, attempt, %endpoint, %error, reason, "cancel not answered"),
        }
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

/// `message` as a request with a gRPC deadline `timeout` from now.
fn with_timeout<T>(message: T, timeout: Duration) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(timeout);
    request
}

/// The W3C trace context of an attempt's call for its request's `trace_context`: the call
/// span's, through the global propagator, when rara exports (the span is recorded); else a
/// `traceparent` of the context the call runs in ([`opentelemetry::Context::current`]: the
/// runtime runs each attempt in its own, in the run's trace with the run's sampled flag), so
/// an executor that exports its spans continues the run's trace whether or not rara does
/// (W3C Trace Context: a participant propagates the context it does not record). Empty only
/// for an attempt that runs in no trace.
fn trace_context(span: &tracing::Span) -> HashMap<String, String> {
    use opentelemetry::trace::TraceContextExt;
    let mut carrier = HashMap::new();
    let context = tracing_opentelemetry::OpenTelemetrySpanExt::context(span);
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&context, &mut carrier));
    if !carrier.contains_key(TRACEPARENT) {
        let current = opentelemetry::Context::current();
        let recorded = context.span().span_context().clone();
        let parent = if recorded.is_valid() { recorded } else { current.span().span_context().clone() };
        if parent.is_valid() {
            carrier.insert(TRACEPARENT.to_owned(), traceparent(&parent));
        }
    }
    carrier
}

/// The W3C header that carries a trace context.
const TRACEPARENT: &str = "traceparent";

/// `context` as a W3C `traceparent` (version 00).
fn traceparent(context: &opentelemetry::trace::SpanContext) -> String {
    format!("00-{}-{}-{:02x}", context.trace_id(), context.span_id(), context.trace_flags().to_u8())
}

#[cfg(test)]
mod trace_tests {
    use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};

    use super::*;

    fn context(flags: TraceFlags) -> SpanContext {
        let trace_id = TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap_or(TraceId::INVALID);
        let span_id = SpanId::from_hex("00f067aa0ba902b7").unwrap_or(SpanId::INVALID);
        SpanContext::new(trace_id, span_id, flags, true, TraceState::default())
    }

    #[test]
    fn without_a_recorded_span_the_context_the_call_runs_in_is_propagated() {
        for (flags, text) in [(TraceFlags::SAMPLED, "01"), (TraceFlags::default(), "00")] {
            let cx = opentelemetry::Context::new().with_remote_span_context(context(flags));
            let _attached = cx.attach();
            let carrier = trace_context(&tracing::Span::none());
            let expected = format!("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-{text}");
            assert_eq!(carrier.get(TRACEPARENT), Some(&expected), "{carrier:?}");
        }
    }

    #[test]
    fn outside_any_trace_nothing_is_propagated() {
        assert!(trace_context(&tracing::Span::none()).is_empty());
    }
}
