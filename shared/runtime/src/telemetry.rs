//! OpenTelemetry: one trace per run, exported over OTLP when an endpoint is configured and
//! entirely off (no exporter, no provider, no layer) when none is.
//!
//! Configured by the standard variables, read once at start ([`Config::from_env`]):
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) turns it on,
//! `OTEL_EXPORTER_OTLP_PROTOCOL` picks `grpc` or `http/protobuf` (the default, as the
//! specification says), and the SDK reads `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_TRACES_SAMPLER` (+ `_ARG`) and the exporter's `OTEL_EXPORTER_OTLP_*` options itself.
//!
//! The trace of a run (DESIGN.md "Tracing"): the run's context (`workflow_runs.trace_context`,
//! a W3C `traceparent`) is the parent of every attempt span; an attempt's span id is derived
//! from its step id and attempt number ([`attempt_span_id`]), so the scheduler can emit it and
//! put it in the message, and a retry links to the attempt before without reading anything.
//! Spans carry ids (`rara.run_id`, `rara.step_id`, operation, attempt, fence), never inputs,
//! outputs or secrets.

use std::cell::Cell;
use std::sync::OnceLock;
use std::time::SystemTime;

use opentelemetry::trace::{
    Link, SpanContext, SpanId, SpanKind, TraceContextExt, TraceFlags, TraceId, TraceState, Tracer, TracerProvider,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, SdkTracerProvider};
use sha2::{Digest, Sha256};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The instrumentation scope of rara's spans.
pub const SCOPE: &str = "rara";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("OTEL_EXPORTER_OTLP_PROTOCOL {0:?} is not supported (use grpc or http/protobuf)")]
    Protocol(String),
    #[error("cannot build the OTLP exporter")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
}

/// The OTLP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Grpc,
    HttpProtobuf,
}

/// Where spans go: `None` when no endpoint is set (telemetry off).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub endpoint: Option<String>,
    pub protocol: Protocol,
}

impl Config {
    /// Reads `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT` and
    /// `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL`.
    pub fn from_env() -> Result<Self, Error> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`Config::from_env`] with the variables given by `var`.
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let protocol = match set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| set("OTEL_EXPORTER_OTLP_PROTOCOL")) {
            None => Protocol::HttpProtobuf,
            Some(p) if p == "http/protobuf" => Protocol::HttpProtobuf,
            Some(p) if p == "grpc" => Protocol::Grpc,
            Some(p) => return Err(Error::Protocol(p)),
        };
        // The traces endpoint is used as it is; the general one is a base URL to which
        // OTLP/HTTP appends the signal's path (the specification).
        let endpoint = match (set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), set("OTEL_EXPORTER_OTLP_ENDPOINT")) {
            (Some(traces), _) => Some(traces),
            (None, Some(base)) if protocol == Protocol::HttpProtobuf => {
                Some(format!("{}/v1/traces", base.trim_end_matches('/')))
            }
            (None, base) => base,
        };
        Ok(Config { endpoint, protocol })
    }

    /// The config of an exporter to `endpoint` (for OTLP/HTTP the full traces URL; tests
    /// point it at their receiver).
    pub fn to(endpoint: &str, protocol: Protocol) -> Self {
        Config { endpoint: Some(endpoint.to_owned()), protocol }
    }
}

/// The tracer provider of this process, kept for [`flush`] (set once, by [`init`]).
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// Installs logging and, when `config` has an endpoint, the OTLP exporter ([`install`]): JSON
/// log lines as Lambda's JSON log format wants them (see `log_filter`), with the
/// OpenTelemetry layer beside them so a step's lines and spans share its trace. Must run
/// inside the Tokio runtime (the gRPC exporter needs it). A second call changes nothing.
pub fn init(service: &str, config: &Config) -> Result<(), Error> {
    let layer = install(service, config)?.map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer(SCOPE)));
    let fmt = tracing_subscriber::fmt::layer()
        .json()
        .with_current_span(true)
        .with_span_list(false)
        .with_writer(std::io::stderr);
    let _ = tracing_subscriber::registry().with(log_filter()).with(fmt).with(layer).try_init();
    Ok(())
}

/// Builds the exporter and the tracer provider when `config` has an endpoint, and makes them
/// this process's (global provider, W3C propagator, [`flush`]); `None` when telemetry is off.
/// The first provider installed stays: a second call builds nothing.
pub fn install(service: &str, config: &Config) -> Result<Option<SdkTracerProvider>, Error> {
    let Some(endpoint) = &config.endpoint else { return Ok(None) };
    if let Some(installed) = PROVIDER.get() {
        return Ok(Some(installed.clone()));
    }
    let provider = provider(service, endpoint, config.protocol)?;
    if PROVIDER.set(provider.clone()).is_ok() {
        opentelemetry::global::set_text_map_propagator(opentelemetry_sdk::propagation::TraceContextPropagator::new());
        opentelemetry::global::set_tracer_provider(provider.clone());
    }
    Ok(Some(provider))
}

/// The level filter: `AWS_LAMBDA_LOG_LEVEL` (Lambda's advanced logging controls) wins, then
/// `RARA_LOG` (a full `EnvFilter` directive), then `info`.
fn log_filter() -> tracing_subscriber::EnvFilter {
    std::env::var("AWS_LAMBDA_LOG_LEVEL")
        .ok()
        .or_else(|| std::env::var("RARA_LOG").ok())
        .filter(|s| !s.trim().is_empty())
        .and_then(|s| tracing_subscriber::EnvFilter::try_new(s.to_lowercase()).ok())
        .unwrap_or_else(|| "info".into())
}

fn provider(service: &str, endpoint: &str, protocol: Protocol) -> Result<SdkTracerProvider, Error> {
    let exporter = match protocol {
        Protocol::Grpc => opentelemetry_otlp::SpanExporter::builder().with_tonic().with_endpoint(endpoint).build()?,
        Protocol::HttpProtobuf => {
            opentelemetry_otlp::SpanExporter::builder().with_http().with_endpoint(endpoint).build()?
        }
    };
    // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over the function's name.
    let mut resource = opentelemetry_sdk::Resource::builder_empty().with_service_name(service.to_owned());
    if std::env::var("OTEL_SERVICE_NAME").is_ok_and(|s| !s.is_empty()) {
        resource = opentelemetry_sdk::Resource::builder();
    }
    Ok(SdkTracerProvider::builder()
        .with_resource(resource.build())
        .with_id_generator(ChosenIds)
        .with_batch_exporter(exporter)
        .build())
}

/// Whether spans are exported.
pub fn enabled() -> bool {
    PROVIDER.get().is_some()
}

/// Exports every finished span now. The Lambdas call it before each invocation returns: a
/// frozen sandbox exports nothing, and the batch processor's interval may never come.
pub async fn flush() {
    if let Some(provider) = PROVIDER.get() {
        let provider = provider.clone();
        // force_flush blocks until the exporter's thread answers.
        match tokio::task::spawn_blocking(move || provider.force_flush()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "could not export the invocation's spans"),
            Err(e) => tracing::warn!(error = %e, "could not export the invocation's spans"),
        }
    }
}

thread_local! {
    /// The ids the next span built on this thread takes ([`ChosenIds`]).
    static NEXT_IDS: Cell<Option<(TraceId, SpanId)>> = const { Cell::new(None) };
}

/// Random ids, except for a span started by [`SpanRecord::emit`] with chosen ones (a run's
/// root, an attempt): the SDK's span builder takes no ids, its id generator does.
#[derive(Debug)]
struct ChosenIds;

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

    #[test]
    fn config_is_off_without_an_endpoint_and_reads_the_protocol() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
        };
        assert_eq!(Config::from_lookup(env(&[])).unwrap().endpoint, None);
        let grpc = Config::from_lookup(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ]))
        .unwrap();
        assert_eq!(grpc, Config::to("http://c:4317", Protocol::Grpc));
        let http = Config::from_lookup(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/")])).unwrap();
        assert_eq!(http, Config::to("http://c:4318/v1/traces", Protocol::HttpProtobuf));
        let traces = Config::from_lookup(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t/spans"),
        ]))
        .unwrap();
        assert_eq!(traces.endpoint.as_deref(), Some("http://t/spans"));
        assert!(Config::from_lookup(env(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")])).is_err());
    }
}
