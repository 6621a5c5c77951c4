//! A secret referenced by a step reaches the system the step calls, and nothing else: no
//! log line, no SQS message (sent, dead-lettered or left on a queue), no database row, no
//! trace context, no exported span (at a real OTLP receiver). Postgres + LocalStack's SQS,
//! through the local scheduler and executor runners; the step is an `http.request` to a local
//! server that echoes the secret back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use common::*;
use rara_domain::step_error::codes;
use rara_platform::runner::{RunnerOptions, run_executor};
use rara_platform::telemetry as platform_telemetry;
use rara_queue::sqs::SqsQueue;
use rara_queue::{Outgoing, Queue, Received};
use rara_runtime::executor::BatchExecutor;
use rara_runtime::scheduler::Scheduler;
use rara_runtime::secrets::{self, SecretResolver};
use rara_runtime::telemetry;
use rara_store::Store;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

const SECRET: &str = "s3cr3t-value-7f9a";
const LIMIT: Duration = Duration::from_secs(60);

/// Every log line of this test binary (JSON, with span fields), from every thread; the spans
/// also go to `provider` (OpenTelemetry), as in the functions.
fn captured_logs(provider: opentelemetry_sdk::trace::SdkTracerProvider) -> Arc<Mutex<Vec<u8>>> {
    use opentelemetry::trace::TracerProvider;
    use tracing_subscriber::layer::SubscriberExt;
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .with_max_level(tracing::Level::DEBUG)
            .with_writer(move || LogSink(sink.clone()))
            .finish()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer(telemetry::SCOPE)));
        tracing::subscriber::set_global_default(subscriber).unwrap();
        logs
    })
    .clone()
}

/// An in-memory secret store.
struct Vault(HashMap<String, String>);

#[async_trait::async_trait]
impl SecretResolver for Vault {
    async fn resolve(&self, name: &str) -> Result<String, secrets::Error> {
        self.0.get(name).cloned().ok_or_else(|| secrets::Error::NotFound { name: name.to_owned() })
    }
}

/// The SQS queue, keeping a copy of every message body and trace context that passes.
struct Recording {
    inner: Arc<SqsQueue>,
    seen: Mutex<Vec<String>>,
}

impl Recording {
    fn keep(&self, text: impl Into<String>) {
        self.seen.lock().unwrap().push(text.into());
    }
}

#[async_trait::async_trait]
impl Queue for Recording {
    async fn send(&self, messages: &[Outgoing]) -> Result<Vec<String>, rara_queue::Error> {
        for m in messages {
            self.keep(&m.body);
            self.keep(m.traceparent.clone().unwrap_or_default());
        }
        self.inner.send(messages).await
    }
    async fn change_visibility(&self, receipt_handle: &str, timeout: Duration) -> Result<(), rara_queue::Error> {
        self.inner.change_visibility(receipt_handle, timeout).await
    }
    async fn receive(&self, max: u32, wait: Duration) -> Result<Vec<Received>, rara_queue::Error> {
        let received = self.inner.receive(max, wait).await?;
        for m in &received {
            self.keep(&m.body);
        }
        Ok(received)
    }
    async fn delete(&self, receipt_handles: &[String]) -> Result<Vec<String>, rara_queue::Error> {
        self.inner.delete(receipt_handles).await
    }
    async fn dead_letter(&self, body: &str, reason_code: &str, reason: &str) -> Result<(), rara_queue::Error> {
        self.keep(format!("{body} {reason_code} {reason}"));
        self.inner.dead_letter(body, reason_code, reason).await
    }
}

/// Answers `/echo` with the `authorization` header it received, as JSON.
async fn echo_server(received: Arc<Mutex<Vec<String>>>) -> SocketAddr {
    let app = axum::Router::new().route(
        "/echo",
        axum::routing::get(move |headers: axum::http::HeaderMap| {
            let received = received.clone();
            async move {
                let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
                received.lock().unwrap().push(auth.clone());
                axum::Json(serde_json::json!({ "you_sent": auth }))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// Every row of every table of the public schema, as JSON text.
async fn dump_database(pool: &PgPool) -> String {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(tables.iter().any(|t| t == "steps"), "{tables:?}");
    let mut dump = String::new();
    for table in tables {
        // The names come from the catalogue, quoted.
        let sql = format!("SELECT row_to_json(t)::text FROM \"{}\" t", table.replace('"', "\"\""));
        let rows: Vec<String> = sqlx::query_scalar(&sql).fetch_all(pool).await.unwrap();
        for row in rows {
            dump.push_str(&table);
            dump.push(' ');
            dump.push_str(&row);
            dump.push('\n');
        }
    }
    dump
}

/// Receives whatever is left on a queue.
async fn leftovers(queues: &Queues, url: &str) -> Vec<String> {
    queues.drain(url).await.into_iter().map(|m| format!("{:?}", (m.body, m.message_attributes))).collect()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_referenced_secret_reaches_the_step_and_nothing_else(pool: PgPool) {
    let receiver = OtlpReceiver::start().await;
    let config = platform_telemetry::Config::to(receiver.http_traces_url(), platform_telemetry::Protocol::HttpProtobuf);
    let logs = captured_logs(platform_telemetry::install("rara-secrets-test", &config).unwrap().unwrap());
    let received = Arc::new(Mutex::new(Vec::new()));
    let addr = echo_server(received.clone()).await;

    let store = Store::new(pool.clone());
    let queues = Queues::new(30, 10).await;
    let settings = Arc::new(settings(&queues, &[("RARA_HTTP_ALLOW_CIDRS", "127.0.0.1/32")]));
    let queue = Arc::new(Recording { inner: queues.queue(), seen: Mutex::new(Vec::new()) });
    let registry = rara_runtime::registry::standard_registry(&settings).await.unwrap();
    let vault = Vault([("api".to_owned(), SECRET.to_owned())].into());
    let executor =
        BatchExecutor::new(store.clone(), queue.clone(), Arc::new(registry), &settings).with_secrets(Arc::new(vault));

    for name in ["api", "nope"] {
        store.grant_secret(name, "secret", "http.request", None).await.unwrap();
    }
    let run_id = submit(
        &store,
        &settings,
        &format!(
            "name: secret\nsteps:\n  - name: call\n    operation: http.request\n    input: {{url: 'http://{addr}/echo', headers: {{authorization: {{$secret: api}}}}}}\n  - name: missing\n    operation: http.request\n    input: {{url: 'http://{addr}/echo', headers: {{x-key: {{$secret: nope}}}}}}\n"
        ),
    )
    .await;

    // The scheduler and the executor runner, both on the recording queue.
    let stop = CancellationToken::new();
    let scheduler = Scheduler::new(store.clone(), queue.clone(), settings.clone());
    let sched = tokio::spawn({
        let stop = stop.clone();
        async move { scheduler.run(None, stop).await }
    });
    let options = RunnerOptions {
        batch_size: 10,
        batching_window: Duration::ZERO,
        wait: Duration::from_secs(1),
        batch_timeout: settings.core.function_timeout,
        margin: settings.deadline_margin,
        until_idle: None,
    };
    let exec = tokio::spawn({
        let (stop, queue) = (stop.clone(), queue.clone() as Arc<dyn Queue>);
        async move { run_executor(&executor, queue, &options, stop).await }
    });
    let started = tokio::time::Instant::now();
    let status = loop {
        let run = store.run(run_id).await.unwrap();
        let done = run.steps.iter().all(|s| matches!(s.status.to_string().as_str(), "succeeded" | "failed"));
        if done || started.elapsed() > LIMIT {
            break run.steps.iter().map(|s| (s.name.clone(), s.status.to_string())).collect::<Vec<_>>();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    stop.cancel();
    sched.await.unwrap().unwrap();
    exec.await.unwrap().unwrap();
    assert_eq!(status, [("call".to_owned(), "succeeded".to_owned()), ("missing".to_owned(), "failed".to_owned())]);

    // The server received the real value.
    assert_eq!(*received.lock().unwrap(), [SECRET]);

    // The stored output carries the echo redacted; the unknown secret is named, not valued.
    let run = store.run(run_id).await.unwrap();
    let call = run.steps.iter().find(|s| s.name == "call").unwrap();
    let output = call.output.as_ref().unwrap();
    assert_eq!(output["body"], r#"{"you_sent":"***"}"#);
    assert_eq!(output["json"], serde_json::json!({"you_sent": "***"}));
    let missing = run.steps.iter().find(|s| s.name == "missing").unwrap();
    let error = missing.error.as_ref().unwrap();
    assert_eq!(error.code, codes::SECRET_NOT_FOUND);
    assert!(error.message.contains("\"nope\""), "{}", error.message);
    assert_eq!(missing.attempt, 1, "a missing secret is not retried");

    // No database row.
    let dump = dump_database(&pool).await;
    assert!(dump.contains(r#"{"$secret": "api"}"#), "the input is stored as a reference:\n{dump}");
    assert!(!dump.contains(SECRET), "the secret is in the database:\n{dump}");

    // No SQS message: every body and trace context sent, received or dead-lettered, and
    // whatever is left on the queue and the DLQ.
    let seen = queue.seen.lock().unwrap().clone();
    assert!(seen.len() >= 2, "{seen:?}");
    for text in &seen {
        assert!(!text.contains(SECRET), "the secret is in a message: {text}");
        if text.starts_with('{') {
            // A step message carries ids (and its steps' trace contexts) only.
            let steps = rara_queue::parse_steps(text).unwrap();
            assert_eq!(text, &rara_queue::encode_steps(&steps));
        } else if !text.is_empty() {
            assert!(rara_runtime::trace_id(text).is_some(), "not a traceparent: {text}");
        }
    }
    for url in [&queues.url, &queues.dlq_url] {
        for left in leftovers(&queues, url).await {
            assert!(!left.contains(SECRET), "the secret is left on a queue: {left}");
        }
    }

    // No log line or trace span; the step's lines were captured (the capture works).
    let logs = String::from_utf8(logs.lock().unwrap().clone()).unwrap();
    let step_lines: Vec<&str> = logs.lines().filter(|l| l.contains(&call.id.to_string())).collect();
    assert!(step_lines.iter().any(|l| l.contains("secret references resolved")), "{logs}");
    assert!(!logs.contains(SECRET), "the secret is in the logs:\n{logs}");
    // The lines in the step's span carry its run's trace id and the execution's span id.
    let trace_id = rara_runtime::trace_id(&store.run_trace(run_id).await.unwrap().unwrap()).unwrap();
    let in_span: Vec<&&str> = step_lines.iter().filter(|l| l.contains("\"span\":")).collect();
    assert!(
        !in_span.is_empty() && in_span.iter().all(|l| l.contains(&trace_id) && l.contains("\"span_id\"")),
        "{in_span:#?}"
    );

    // No exported span (the step's spans were exported: the export works).
    platform_telemetry::flush().await;
    let spans = receiver.spans();
    assert!(spans.iter().any(|s| s.attribute("rara.step_id") == Some(&*call.id.to_string())), "{spans:#?}");
    for span in &spans {
        assert!(!format!("{span:?}").contains(SECRET), "the secret is in a span: {span:#?}");
    }
}
