//! The trace of a run as the core writes it (DESIGN.md "Tracing"), with the OpenTelemetry API
//! only: the exporter, the provider and the log lines are set up by `rara-platform`
//! (`rara_platform::telemetry`), which marks spans as exported ([`set_exporting`]) and builds
//! its provider with [`ChosenIds`]. Without it (tests, telemetry off) no span is built.
//!
//! The run's context (`workflow_runs.trace_context`, a W3C `traceparent`) is the parent of
//! every attempt span; an attempt's span id is derived from its step id and attempt number
//! ([`attempt_span_id`]), so the scheduler can emit it and put it in the message, and a retry
//! links to the attempt before without reading anything. Spans carry ids (`rara.run_id`,
//! `rara.step_id`, operation, attempt, fence), never inputs, outputs or secrets.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use opentelemetry::trace::{
    Link, SpanContext, SpanId, SpanKind, TraceContextExt, TraceFlags, TraceId, TraceState, Tracer,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};
use sha2::{Digest, Sha256};

/// The instrumentation scope of rara's spans.
pub const SCOPE: &str = "rara";

/// Whether spans are exported: set once, by the platform's exporter setup.
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Marks spans as exported (the platform calls it once its provider is the global one): from
/// now on [`SpanRecord::emit`] builds spans.
pub fn set_exporting() {
    EXPORTING.store(true, Ordering::Relaxed);
}

/// Whether spans are exported.
pub fn enabled() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

thread_local! {
    /// The ids the next span built on this thread takes ([`ChosenIds`]).
    static NEXT_IDS: Cell<Option<(TraceId, SpanId)>> = const { Cell::new(None) };
}

/// Random ids, except for a span started by [`SpanRecord::emit`] with chosen ones (a run's
/// root, an attempt): the SDK's span builder takes no ids, its id generator does. The
/// platform's tracer provider is built with it.
#[derive(Debug, Clone, Copy, Default)]
pub struct ChosenIds;

impl IdGenerator for ChosenIds {
    fn new_trace_id(&self) -> TraceId {
        match NEXT_IDS.with(Cell::get) {
            Some((trace_id, _)) => trace_id,
            None => RandomIdGenerator::default().new_trace_id(),
        }
    }

    fn new_span_id(&self) -> SpanId {
        match NEXT_IDS.with(Cell::get) {
            Some((_, span_id)) => span_id,
            None => RandomIdGenerator::default().new_span_id(),
        }
    }
}

/// The span id of attempt `attempt` of step `step_id`: the first 8 bytes of
/// SHA-256("rara.attempt" ‖ step id ‖ attempt), never zero. The scheduler, the executor and a
/// retry all compute it alone.
pub fn attempt_span_id(step_id: uuid::Uuid, attempt: i32) -> SpanId {
    let digest = Sha256::new()
        .chain_update(b"rara.attempt")
        .chain_update(step_id.as_bytes())
        .chain_update(attempt.to_be_bytes())
        .finalize();
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    if bytes == [0; 8] {
        bytes[7] = 1;
    }
    SpanId::from_bytes(bytes)
}

/// A W3C `traceparent`, parsed: `None` unless version 00 with valid ids.
pub fn parse_traceparent(text: &str) -> Option<SpanContext> {
    let mut parts = text.trim().split('-');
    let (version, trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if version != "00" || parts.next().is_some() || trace.len() != 32 || span.len() != 16 || flags.len() != 2 {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok()?;
    let span_id = SpanId::from_hex(span).ok()?;
    let flags = TraceFlags::new(u8::from_str_radix(flags, 16).ok()?);
    let context = SpanContext::new(trace_id, span_id, flags, true, TraceState::default());
    context.is_valid().then_some(context)
}

/// The `traceparent` of `context`.
pub fn traceparent(context: &SpanContext) -> String {
    format!("00-{}-{}-{:02x}", context.trace_id(), context.span_id(), context.trace_flags().to_u8())
}

/// A fresh `traceparent` (sampled) in the trace of `parent` when given, else in a new trace.
pub fn new_traceparent(parent: Option<&SpanContext>) -> String {
    let ids = RandomIdGenerator::default();
    let trace_id = parent.map_or_else(|| ids.new_trace_id(), SpanContext::trace_id);
    let flags = parent.map_or(TraceFlags::SAMPLED, SpanContext::trace_flags);
    traceparent(&SpanContext::new(trace_id, ids.new_span_id(), flags, false, TraceState::default()))
}

/// The context of attempt `attempt` of a step of the run whose context is `run`.
pub fn attempt_context(run: &SpanContext, step_id: uuid::Uuid, attempt: i32) -> SpanContext {
    SpanContext::new(run.trace_id(), attempt_span_id(step_id, attempt), run.trace_flags(), true, TraceState::default())
}

/// The ids of a step attempt, as span attributes (all string-valued, ids only; the fence once
/// the attempt is claimed).
pub fn step_attributes(
    run_id: uuid::Uuid,
    step_id: uuid::Uuid,
    operation: &str,
    attempt: i32,
    fence: Option<i64>,
) -> Vec<KeyValue> {
    let mut attributes = vec![
        KeyValue::new("rara.run_id", run_id.to_string()),
        KeyValue::new("rara.step_id", step_id.to_string()),
        KeyValue::new("rara.operation", operation.to_owned()),
        KeyValue::new("rara.attempt", attempt.to_string()),
    ];
    attributes.extend(fence.map(|f| KeyValue::new("rara.fence", f.to_string())));
    attributes
}

/// The root span of a submitted run (`rara.run`): `run` is the context stored on the run,
/// `parent` the submitter's (`TRACEPARENT`) when it continued one. Ids and the workflow's
/// name only.
pub fn emit_run_span(
    run: &SpanContext,
    parent: Option<SpanContext>,
    run_id: uuid::Uuid,
    workflow: &str,
    start: SystemTime,
    end: SystemTime,
) {
    let mut span = SpanRecord::new("rara.run", parent, start, end);
    span.ids = Some((run.trace_id(), run.span_id()));
    span.attributes =
        vec![KeyValue::new("rara.run_id", run_id.to_string()), KeyValue::new("rara.workflow", workflow.to_owned())];
    span.emit();
}

/// A finished span, emitted after the fact with its own times (a statement that served many
/// steps gives each of them a span with the statement's times).
#[derive(Debug)]
pub struct SpanRecord {
    pub name: &'static str,
    pub kind: SpanKind,
    pub parent: Option<SpanContext>,
    /// The span's own span id when it must be this one (a run's root, an attempt); its trace
    /// id is the parent's, or the chosen one's when there is no parent.
    pub ids: Option<(TraceId, SpanId)>,
    pub start: SystemTime,
    pub end: SystemTime,
    pub attributes: Vec<KeyValue>,
    pub links: Vec<SpanContext>,
}

impl SpanRecord {
    pub fn new(name: &'static str, parent: Option<SpanContext>, start: SystemTime, end: SystemTime) -> Self {
        SpanRecord {
            name,
            kind: SpanKind::Internal,
            parent,
            ids: None,
            start,
            end,
            attributes: Vec::new(),
            links: Vec::new(),
        }
    }

    /// Exports the span (nothing when telemetry is off).
    pub fn emit(self) {
        if !enabled() {
            return;
        }
        let tracer = opentelemetry::global::tracer(SCOPE);
        let parent = match &self.parent {
            Some(p) => Context::new().with_remote_span_context(p.clone()),
            None => Context::new(),
        };
        let builder = tracer
            .span_builder(self.name)
            .with_kind(self.kind)
            .with_start_time(self.start)
            .with_attributes(self.attributes)
            .with_links(self.links.into_iter().map(Link::with_context).collect());
        NEXT_IDS.with(|n| n.set(self.ids));
        let mut span = builder.start_with_context(&tracer, &parent);
        NEXT_IDS.with(|n| n.set(None));
        opentelemetry::trace::Span::end_with_timestamp(&mut span, self.end);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn attempt_span_ids_are_stable_and_distinct() {
        let step = uuid::Uuid::now_v7();
        assert_eq!(attempt_span_id(step, 1), attempt_span_id(step, 1));
        assert_ne!(attempt_span_id(step, 1), attempt_span_id(step, 2));
        assert_ne!(attempt_span_id(step, 1), attempt_span_id(uuid::Uuid::now_v7(), 1));
    }

    #[test]
    fn traceparent_round_trips_and_rejects_garbage() {
        let text = new_traceparent(None);
        let context = parse_traceparent(&text).unwrap();
        assert_eq!(traceparent(&context), text);
        let child = parse_traceparent(&new_traceparent(Some(&context))).unwrap();
        assert_eq!(child.trace_id(), context.trace_id());
        assert_ne!(child.span_id(), context.span_id());
        for bad in [
            "",
            "00-abc-def-01",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad}");
        }
    }
}
