//! OpenTelemetry's export and the log lines: one trace per run, exported over OTLP when an
//! endpoint is configured and entirely off (no exporter, no provider, no layer) when none is.
//! The spans themselves are written by the core ([`rara_runtime::telemetry`]).
//!
//! Configured by the standard variables, read once at start ([`Config::from_env`]):
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) turns it on,
//! `OTEL_EXPORTER_OTLP_PROTOCOL` picks `grpc` or `http/protobuf` (the default, as the
//! specification says), and the SDK reads `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_TRACES_SAMPLER` (+ `_ARG`) and the exporter's `OTEL_EXPORTER_OTLP_*` options itself.

use std::sync::OnceLock;

use opentelemetry::trace::TracerProvider;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::SdkTracerProvider;
use rara_runtime::telemetry::{self, ChosenIds, SCOPE};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

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
        telemetry::set_exporting();
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

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
