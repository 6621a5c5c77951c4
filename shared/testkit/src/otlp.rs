//! A real OTLP receiver for tests: the collector's trace service over gRPC (tonic, the
//! generated `TraceService`) and over HTTP (`POST /v1/traces`, a protobuf body), both on
//! 127.0.0.1, keeping every span it is sent. Tests point the exporters at it (Rust and
//! Python alike) and assert the spans and their parent/link structure.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use prost::Message;
use tokio::task::JoinHandle;

/// One received span, its ids in lowercase hex (empty parent: a root).
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedSpan {
    pub service: String,
    pub name: String,
    /// The OTLP span kind (1 internal, 2 server, 3 client, 4 producer, 5 consumer).
    pub kind: i32,
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: String,
    /// Every attribute, rendered as text.
    pub attributes: HashMap<String, String>,
    /// The spans it links to: (trace id, span id).
    pub links: Vec<(String, String)>,
    pub start_unix_nano: u64,
    pub end_unix_nano: u64,
}

impl ReceivedSpan {
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

type Spans = Arc<Mutex<Vec<ReceivedSpan>>>;

/// The receiver; its servers stop on drop.
#[derive(Debug)]
pub struct OtlpReceiver {
    spans: Spans,
    grpc: String,
    http: String,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl OtlpReceiver {
    /// Starts both servers on free ports (inside a Tokio runtime).
    pub async fn start() -> OtlpReceiver {
        let spans: Spans = Arc::default();
        let grpc_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the OTLP/gRPC port");
        let http_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the OTLP/HTTP port");
        let grpc = format!("http://{}", grpc_listener.local_addr().expect("a bound address"));
        let http = format!("http://{}/v1/traces", http_listener.local_addr().expect("a bound address"));
        let service = TraceServiceServer::new(Collector(spans.clone()));
        let grpc_task = tokio::spawn(async move {
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(grpc_listener);
            let _ = tonic::transport::Server::builder().add_service(service).serve_with_incoming(incoming).await;
        });
        let kept = spans.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: axum::body::Bytes| {
                let kept = kept.clone();
                async move { http_export(&kept, &body) }
            }),
        );
        let http_task = tokio::spawn(async move {
            let _ = axum::serve(http_listener, app).await;
        });
        OtlpReceiver { spans, grpc, http, tasks: vec![grpc_task, http_task] }
    }

    /// The OTLP/gRPC endpoint (`http://127.0.0.1:PORT`).
    pub fn grpc_endpoint(&self) -> &str {
        &self.grpc
    }

    /// The OTLP/HTTP traces URL (`http://127.0.0.1:PORT/v1/traces`).
    pub fn http_traces_url(&self) -> &str {
        &self.http
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The spans received once `done` holds for them, or `None` after `within` (a bound for
    /// a test that would otherwise hang, not a timing assertion).
    pub async fn wait_for(
        &self,
        within: Duration,
        done: impl Fn(&[ReceivedSpan]) -> bool,
    ) -> Option<Vec<ReceivedSpan>> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let spans = self.spans();
            if done(&spans) {
                return Some(spans);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The gRPC trace service.
#[derive(Debug)]
struct Collector(Spans);

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        keep(&self.0, request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

fn http_export(spans: &Spans, body: &[u8]) -> (axum::http::StatusCode, [(&'static str, &'static str); 1], Vec<u8>) {
    let header = [("content-type", "application/x-protobuf")];
    match ExportTraceServiceRequest::decode(body) {
        Ok(request) => {
            keep(spans, request);
            (axum::http::StatusCode::OK, header, ExportTraceServiceResponse { partial_success: None }.encode_to_vec())
        }
        Err(_) => (axum::http::StatusCode::BAD_REQUEST, header, Vec::new()),
    }
}

fn keep(spans: &Spans, request: ExportTraceServiceRequest) {
    let mut kept = spans.lock().unwrap_or_else(PoisonError::into_inner);
    for resource_spans in request.resource_spans {
        let resource = resource_spans.resource.map(|r| attributes(&r.attributes)).unwrap_or_default();
        let service = resource.get("service.name").cloned().unwrap_or_default();
        for span in resource_spans.scope_spans.into_iter().flat_map(|s| s.spans) {
            kept.push(ReceivedSpan {
                service: service.clone(),
                name: span.name,
                kind: span.kind,
                trace_id: hex(&span.trace_id),
                span_id: hex(&span.span_id),
                parent_span_id: hex(&span.parent_span_id),
                attributes: attributes(&span.attributes),
                links: span.links.iter().map(|l| (hex(&l.trace_id), hex(&l.span_id))).collect(),
                start_unix_nano: span.start_time_unix_nano,
                end_unix_nano: span.end_time_unix_nano,
            });
        }
    }
}

fn attributes(list: &[KeyValue]) -> HashMap<String, String> {
    list.iter().map(|kv| (kv.key.clone(), kv.value.as_ref().map(text).unwrap_or_default())).collect()
}

fn text(value: &AnyValue) -> String {
    match &value.value {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        Some(Value::BytesValue(b)) => hex(b),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
