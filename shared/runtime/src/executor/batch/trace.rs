//! The executor's part of a run's trace (DESIGN.md "Tracing"): for each claimed step, the
//! attempt span (its id derived from step id and attempt, its parent the run's context that
//! the message carries, linked to the attempt before), and under it the claim, the execution
//! (the step's `tracing` span, and the gRPC call inside it) and the outcome write.

use std::time::SystemTime;

use opentelemetry::KeyValue;
use opentelemetry::trace::{SpanContext, TraceContextExt};
use rara_store::claim::ClaimedStep;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::executor::fate::Verdict;
use crate::telemetry::{self, SpanRecord};

/// Who an attempt is, for its spans.
#[derive(Debug, Clone, Copy)]
pub(super) struct Attempt<'a> {
    pub run_id: uuid::Uuid,
    pub step_id: uuid::Uuid,
    pub operation: &'a str,
    pub attempt: u32,
    pub fence: i64,
}

/// A claimed attempt's place in its run's trace.
#[derive(Debug, Clone)]
pub(super) struct AttemptTrace {
    run: SpanContext,
    attempt: SpanContext,
    /// The attempt before (a retry links to it).
    previous: Option<SpanContext>,
    claimed: SystemTime,
    attributes: Vec<KeyValue>,
}

impl AttemptTrace {
    /// `None` when the message carries no valid `traceparent` (a run from before tracing).
    pub(super) fn new(traceparent: Option<&str>, step: &ClaimedStep, claimed: SystemTime) -> Option<Self> {
        let attempt = Attempt {
            run_id: step.run_id,
            step_id: step.holder.step_id,
            operation: &step.operation,
            attempt: step.attempt,
            fence: step.holder.fence,
        };
        Self::of(traceparent, attempt, claimed)
    }

    /// The same for any attempt (a quick step's has no [`ClaimedStep`]).
    pub(super) fn of(traceparent: Option<&str>, step: Attempt<'_>, claimed: SystemTime) -> Option<Self> {
        let run = telemetry::parse_traceparent(traceparent?)?;
        let attempt = step.attempt as i32;
        let step_id = step.step_id;
        Some(AttemptTrace {
            attempt: telemetry::attempt_context(&run, step_id, attempt),
            previous: (attempt > 1).then(|| telemetry::attempt_context(&run, step_id, attempt - 1)),
            run,
            claimed,
            attributes: telemetry::step_attributes(step.run_id, step_id, step.operation, attempt, Some(step.fence)),
        })
    }

    /// The claim statement's span (`start`..`end`), under the attempt.
    pub(super) fn claim(&self, start: SystemTime, end: SystemTime) {
        let mut span = SpanRecord::new("rara.claim", Some(self.attempt.clone()), start, end);
        span.attributes = self.attributes.clone();
        span.emit();
    }

    /// The execution's span (`start`..`end`), under the attempt, for an execution that ran
    /// without a `tracing` span of its own (a quick step's, inside its lock's transaction).
    pub(super) fn execute(&self, start: SystemTime, end: SystemTime) {
        let mut span = SpanRecord::new("rara.execute", Some(self.attempt.clone()), start, end);
        span.attributes = self.attributes.clone();
        span.emit();
    }

    /// The attempt's OpenTelemetry context (the run's trace id and sampled flag, the attempt's
    /// span id), which the execution runs in: a remote executor's call propagates it when no
    /// span of rara's is recorded (telemetry off).
    pub(super) fn context(&self) -> opentelemetry::Context {
        opentelemetry::Context::new().with_remote_span_context(self.attempt.clone())
    }

    /// Makes the attempt the parent of the step's execution span (so its log lines carry the
    /// run's trace id and, when exported, the span's id; the gRPC call continues the trace).
    pub(super) fn adopt(&self, span: &tracing::Span) {
        let parent = opentelemetry::Context::new().with_remote_span_context(self.attempt.clone());
        // Refused only when no OpenTelemetry layer is installed (telemetry off).
        let _ = span.set_parent(parent);
        for attribute in &self.attributes {
            span.set_attribute(attribute.key.clone(), attribute.value.clone());
        }
        span.record("trace_id", tracing::field::display(self.attempt.trace_id()));
        let own = span.context().span().span_context().span_id();
        if own != opentelemetry::trace::SpanId::INVALID {
            span.record("span_id", tracing::field::display(own));
        }
    }

    /// The outcome write's span (`start`..`end`), and the attempt's own span, ended with it,
    /// unless the attempt goes on (parked: the invocation that records its outcome ends it).
    /// `outcome` is [`outcome`] of the attempt's verdict.
    pub(super) fn finish(self, outcome: &'static str, start: SystemTime, end: SystemTime) {
        let mut record = SpanRecord::new("rara.record", Some(self.attempt.clone()), start, end);
        record.attributes = self.attributes.clone();
        record.attributes.push(KeyValue::new("rara.outcome", outcome));
        record.emit();
        if outcome == PARKED {
            return;
        }
        let mut attempt = SpanRecord::new("rara.attempt", Some(self.run), self.claimed, end);
        attempt.ids = Some((self.attempt.trace_id(), self.attempt.span_id()));
        attempt.attributes = self.attributes;
        attempt.attributes.push(KeyValue::new("rara.outcome", outcome));
        attempt.links = self.previous.into_iter().collect();
        attempt.emit();
    }
}

const PARKED: &str = "parked";

/// What the attempt's outcome is called on its spans, and its metric's name
/// ([`crate::metrics::OperationMetrics`]).
pub(super) fn outcome(verdict: &Verdict) -> (&'static str, &'static str) {
    match verdict {
        Verdict::Succeed(_) => ("succeeded", "Succeeded"),
        Verdict::Fail(_) => ("failed", "Failed"),
        Verdict::RetryByMessage { .. } | Verdict::RetryByPostgres { .. } => ("retried", "Retried"),
        Verdict::Nothing => ("lease_lost", "LeaseLost"),
        Verdict::Release => ("released", "Released"),
        Verdict::Park(_) => (PARKED, "Parked"),
        Verdict::Expand(_) => ("expanded", "Expanded"),
        Verdict::StartChild(_) => ("waiting", "ChildStarted"),
    }
}
