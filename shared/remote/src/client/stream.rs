//! The stream of a call, read to its terminal event (and the end of the stream after it): the
//! event order checked, progress, artifacts and the version forwarded to the reporter, the idle
//! timeout, and a detachable attempt parked between two events.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rara_domain::StepError;
use rara_domain::executor::{Artifact, ExecutionContext};
use rara_domain::step_error::codes;
use tokio::time::Instant;
use tonic::Status;

use super::failure::{Interrupted, Stop, report};
use super::{Call, DEADLINE_GRACE, DEADLINE_MARGIN, END_OF_STREAM_GRACE, RemoteExecutor, with_timeout};
use crate::bounds;
use crate::pb::execute_response::Event;
use crate::pb::{self};
use crate::protocol::EventOrder;
use crate::transport::IDLE_HEARTBEATS;

impl RemoteExecutor {
    /// Runs the call to its terminal event (and the end of the stream after it). A detachable
    /// attempt is parked between two events when `ctx.detach.park` fires.
    pub(super) async fn stream(
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
        let mut artifacts = 0usize;
        loop {
            if self.detachable && outcome.is_none() && ctx.detach.park.is_cancelled() {
                return Err(Interrupted::Parked);
            }
            let next = if outcome.is_some() {
                match self.end_of_stream(ctx, &mut events).await {
                    Some(next) => next,
                    None => break,
                }
            } else {
                self.next_event(ctx, &mut events, order.seen(), cancel_sent).await?
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
                Err(status) if is_too_large(&status) => {
                    let error = bounds::message_too_large(self.limits.max_decoding_message_size());
                    return Err(self.refuse(ctx, error, cancel_sent).await);
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
            if let Err(error) = self.within_limits(event.event.as_ref(), &mut artifacts) {
                return Err(self.refuse(ctx, error, cancel_sent).await);
            }
            let sequence = event.sequence;
            if let Some(end) = self.take(ctx, event.event, &mut events, cancel_sent).await? {
                outcome = Some(end);
            }
            // Recorded (progress and artifacts are written): a re-attach goes on after it.
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

    /// The next message before the terminal event: a detachable attempt is parked when
    /// `ctx.detach.park` fires while it waits.
    async fn next_event(
        &self,
        ctx: &ExecutionContext,
        events: &mut tonic::Streaming<pb::ExecuteResponse>,
        seen: u64,
        cancel_sent: &AtomicBool,
    ) -> Result<Result<Option<pb::ExecuteResponse>, Status>, Interrupted> {
        if self.detachable {
            // Park first: a stream that always has an event ready still lets go at the next
            // boundary, and an event left unread is read again at re-attach (`after_sequence`).
            tokio::select! {
                biased;
                () = ctx.detach.park.cancelled() => Err(Interrupted::Parked),
                next = self.next_or_idle(ctx, events, seen, cancel_sent) => next,
            }
        } else {
            self.next_or_idle(ctx, events, seen, cancel_sent).await
        }
    }

    /// After the terminal event, the next message (the end, normally), waited for at most
    /// [`END_OF_STREAM_GRACE`] and never past a little before the deadline: the outcome is in.
    /// `None`: the stream stayed open (logged).
    async fn end_of_stream(
        &self,
        ctx: &ExecutionContext,
        events: &mut tonic::Streaming<pb::ExecuteResponse>,
    ) -> Option<Result<Option<pb::ExecuteResponse>, Status>> {
        let until = (Instant::now() + END_OF_STREAM_GRACE)
            .min(ctx.deadline.checked_sub(DEADLINE_MARGIN).unwrap_or(ctx.deadline));
        let next = tokio::time::timeout_at(until, events.message()).await.ok();
        if next.is_none() {
            tracing::warn!(endpoint = %self.endpoint, "stream stayed open after its terminal event");
        }
        next
    }

    /// Takes one event in order: forwards a report (a lost lease sends `Cancel` and ends the
    /// call), or returns the outcome a terminal event carries.
    async fn take(
        &self,
        ctx: &ExecutionContext,
        event: Option<Event>,
        events: &mut tonic::Streaming<pb::ExecuteResponse>,
        cancel_sent: &AtomicBool,
    ) -> Result<Option<Result<serde_json::Value, StepError>>, Interrupted> {
        let reported = match event {
            Some(Event::Running(running)) if !running.capability_version.is_empty() => {
                ctx.reporter.version(&running.capability_version).await
            }
            Some(Event::Accepted(_) | Event::Running(_) | Event::Heartbeat(_)) | None => Ok(()),
            Some(Event::Progress(progress)) => {
                let message = bounds::truncate(progress.message, bounds::MAX_PROGRESS_MESSAGE_BYTES);
                ctx.reporter.progress(fraction(progress.fraction), &message).await
            }
            Some(Event::Artifact(artifact)) => ctx.reporter.artifact(artifact_of(artifact)).await,
            Some(Event::Succeeded(succeeded)) => return Ok(Some(self.output(&succeeded.output_json))),
            Some(Event::Failed(failed)) => return Ok(Some(Err(self.remote_error(failed.error)))),
            Some(Event::Cancelled(cancelled)) => {
                return Ok(Some(Err(StepError::permanent(
                    codes::CANCELLED,
                    format!("remote executor {} cancelled {}: {}", self.endpoint, self.operation, cancelled.reason),
                ))));
            }
        };
        if let Err(lost) = report(reported) {
            self.cancel_then_drain(ctx, events, cancel_sent).await;
            return Err(lost);
        }
        Ok(None)
    }

    /// Whether an event holds to the [`Limits`](crate::bounds::Limits): the output's size,
    /// the count of artifacts so far (`artifacts`, counted here) and each artifact's fields.
    fn within_limits(&self, event: Option<&Event>, artifacts: &mut usize) -> Result<(), StepError> {
        match event {
            Some(Event::Succeeded(succeeded)) => self.limits.check_output(succeeded.output_json.len()),
            Some(Event::Artifact(artifact)) => {
                *artifacts += 1;
                let max = self.limits.max_artifacts;
                bounds::within("artifacts", *artifacts, max, "RARA_MAX_ARTIFACTS_PER_ATTEMPT").map_err(|e| {
                    StepError { message: format!("the executor reported more than {max} artifacts in one attempt (RARA_MAX_ARTIFACTS_PER_ATTEMPT)"), ..e }
                })?;
                bounds::within("artifact.name", artifact.name.len(), bounds::MAX_ARTIFACT_NAME_BYTES, "")?;
                bounds::within("artifact.uri", artifact.uri.len(), bounds::MAX_ARTIFACT_URI_BYTES, "")?;
                bounds::within(
                    "artifact.media_type",
                    artifact.media_type.len(),
                    bounds::MAX_ARTIFACT_MEDIA_TYPE_BYTES,
                    "",
                )?;
                bounds::within("artifact.digest", artifact.digest.len(), bounds::MAX_ARTIFACT_DIGEST_BYTES, "")
            }
            _ => Ok(()),
        }
    }

    /// An event beyond its bound: `Cancel` (best effort, unless sent already), then the
    /// attempt fails with `error` (permanent `OUTPUT_TOO_LARGE`).
    async fn refuse(&self, ctx: &ExecutionContext, error: StepError, cancel_sent: &AtomicBool) -> Interrupted {
        tracing::warn!(step_id = %ctx.step_id, attempt = ctx.attempt, endpoint = %self.endpoint, message = %error.message, "the remote executor returned more than its bound; the attempt fails");
        if !cancel_sent.swap(true, Ordering::SeqCst) {
            self.send_cancel(ctx, "the attempt returned more than rara accepts").await;
        }
        let message = format!("{} ({} on {})", error.message, self.operation, self.endpoint);
        Interrupted::Failed(StepError { message, ..error })
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
}

/// Whether a stream's error is tonic refusing to decode a message beyond the decoding limit.
fn is_too_large(status: &Status) -> bool {
    status.code() == tonic::Code::OutOfRange && status.message().contains("message length too large")
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
}
