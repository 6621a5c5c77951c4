//! Test support for rara's crates: a real SQS API (LocalStack, started by
//! `scripts/localstack.sh` when nothing answers), a fresh queue + DLQ per test, test
//! settings and a workflow factory. Test code: it panics on any setup failure.
//!
//! # Layout
//!
//! - this file: LocalStack [`Queues`], [`secrets_client`] and [`s3_store`] (a fresh bucket), [`settings`], [`submit`];
//! - [`python`]: the real Python executor as a subprocess ([`PythonServer`]);
//! - [`otlp`]: a real OTLP receiver (gRPC and HTTP) keeping the spans it is sent ([`OtlpReceiver`]);
//! - [`peer`]: TCP peers in front of a real service: one that can go silent ([`SilentPeer`]),
//!   one that owns its port and refuses connections until told to listen ([`LatePeer`]);
//! - [`eventually`](mod@eventually): waiting for state, not for time ([`eventually()`]);
//! - [`scratch`]: a scratch database (create, migrate, drop), shared with `rara-bench`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::missing_panics_doc)]

pub mod eventually;
pub mod history;
pub mod otlp;
pub mod peer;
pub mod python;
pub mod scratch;

pub use eventually::{eventually, eventually_within};
pub use otlp::OtlpReceiver;
pub use peer::{LatePeer, SilentPeer};
pub use python::PythonServer;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Once};

use aws_sdk_sqs::Client;
use rara_domain::workflow::{Format, WorkflowDefinition};
use rara_platform::aws::AwsConfig;
use rara_queue::sqs::SqsQueue;
use rara_runtime::settings::Settings;
use rara_runtime::timeouts::Timeouts;
use rara_store::Store;
use uuid::Uuid;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repo root")
}

pub fn endpoint() -> String {
    std::env::var("AWS_ENDPOINT_URL").unwrap_or_else(|_| "http://localhost:4566".into())
}

/// `command` talking to LocalStack as a deployed function talks to AWS: the endpoint, a region
/// and LocalStack's test credentials.
pub fn with_localstack(command: &mut std::process::Command) -> &mut std::process::Command {
    command
        .env("AWS_ENDPOINT_URL", endpoint())
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
}

/// The IAM check's verdicts (`scripts/check-iam.sh --json`) on the AWS calls recorded in
/// `dir`, and whether every call passed; panics, with what the check said, when it checked
/// nothing.
pub fn check_iam(dir: &std::path::Path) -> (Vec<serde_json::Value>, bool) {
    let check = std::process::Command::new(repo_root().join("scripts/check-iam.sh"))
        .current_dir(repo_root())
        .arg("--json")
        .arg(dir)
        .output()
        .expect("scripts/check-iam.sh runs");
    let results = serde_json::from_slice(&check.stdout)
        .unwrap_or_else(|e| panic!("no calls checked ({e}): {}", String::from_utf8_lossy(&check.stderr)));
    (results, check.status.success())
}

/// The socket address of [`endpoint`] (LocalStack's gateway), for a [`SilentPeer`] in front.
pub fn endpoint_addr() -> std::net::SocketAddr {
    let endpoint = endpoint();
    let port = endpoint.rsplit(':').next().and_then(|p| p.trim_end_matches('/').parse().ok()).unwrap_or(4566);
    std::net::SocketAddr::from(([127, 0, 0, 1], port))
}

/// Starts LocalStack once per test binary unless something already answers.
fn ensure_localstack() {
    static START: Once = Once::new();
    START.call_once(|| {
        let status = std::process::Command::new(repo_root().join("scripts/localstack.sh"))
            .arg("start")
            .status()
            .expect("run scripts/localstack.sh start");
        assert!(status.success(), "LocalStack did not start (scripts/localstack.sh start)");
    });
}

/// An SDK configuration for LocalStack (started if nothing answers).
pub async fn localstack_config() -> aws_config::SdkConfig {
    ensure_localstack();
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(endpoint())
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sqs::config::Credentials::new("test", "test", None, None, "rara-tests"))
        .load()
        .await
}

/// An SQS client on LocalStack; it records its calls for the IAM check when
/// `RARA_AWS_CALL_LOG` is set, as the functions' clients do ([`rara_platform::call_log`]).
pub async fn sqs_client() -> Client {
    rara_platform::aws::sqs_client(&localstack_config().await)
}

/// A Secrets Manager client on LocalStack (recording its calls as [`sqs_client`]'s).
pub async fn secrets_client() -> aws_sdk_secretsmanager::Client {
    rara_platform::aws::secrets_manager_client(&localstack_config().await)
}

/// An S3 client on LocalStack (recording its calls as [`sqs_client`]'s).
pub async fn s3_client() -> aws_sdk_s3::Client {
    rara_platform::aws::s3_client(&localstack_config().await)
}

/// A fresh bucket on LocalStack and the artifact store at `s3://{bucket}/{prefix}`.
pub async fn s3_store(prefix: &str) -> (Arc<dyn rara_artifacts::ArtifactStore>, String) {
    let client = s3_client().await;
    let bucket = format!("rara-test-{}", Uuid::new_v4().simple());
    client.create_bucket().bucket(&bucket).send().await.expect("create a bucket on LocalStack");
    let uri = format!("s3://{bucket}/{prefix}");
    (rara_platform::aws::open_artifacts(&uri, || client).expect("an s3:// store"), uri)
}

/// A fresh queue and DLQ (redrive after `max_receive` receives).
#[derive(Debug)]
pub struct Queues {
    pub client: Client,
    pub url: String,
    pub dlq_url: String,
}

impl Queues {
    pub async fn new(visibility_seconds: u32, max_receive: u32) -> Queues {
        let client = sqs_client().await;
        // The IAM check reads a queue of this name as the template's StepQueue (`-dlq`: its DLQ).
        let name = format!("{}{}", rara_platform::call_log::TEST_QUEUE_PREFIX, Uuid::new_v4().simple());
        let visibility = std::time::Duration::from_secs(u64::from(visibility_seconds));
        let pair = rara_queue::sqs::create_queue_pair(&client, &name, visibility, max_receive).await.unwrap();
        Queues { client, url: pair.queue_url, dlq_url: pair.dlq_url }
    }

    pub fn queue(&self) -> Arc<SqsQueue> {
        Arc::new(SqsQueue::new(self.client.clone(), self.url.clone(), Some(self.dlq_url.clone())))
    }

    /// These queues reached through `peer` (which forwards to LocalStack, or is silent),
    /// with a client carrying rara's `timeouts`, as the functions build it.
    pub async fn queue_through(&self, peer: &SilentPeer, timeouts: &Timeouts) -> Arc<SqsQueue> {
        let sdk = timeouts.aws_config().await;
        let config = aws_sdk_sqs::config::Builder::from(&sdk)
            .endpoint_url(peer.url())
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_sqs::config::Credentials::new("test", "test", None, None, "rara-tests"));
        let client = rara_platform::aws::sqs_client_of(config);
        Arc::new(SqsQueue::new(client, self.url.clone(), Some(self.dlq_url.clone())))
    }

    pub async fn send_raw(&self, body: &str) {
        self.client.send_message().queue_url(&self.url).message_body(body).send().await.unwrap();
    }

    /// Drains the DLQ: (body, reason code) of every message on it.
    pub async fn dead_letters(&self) -> Vec<(String, Option<String>)> {
        self.drain(&self.dlq_url)
            .await
            .into_iter()
            .map(|m| {
                let code = m
                    .message_attributes
                    .as_ref()
                    .and_then(|a| a.get(rara_queue::sqs::DLQ_REASON_CODE))
                    .and_then(|v| v.string_value.clone());
                (m.body.unwrap_or_default(), code)
            })
            .collect()
    }

    /// Receives (and so hides) every message left on the queue at `url`, with all attributes.
    pub async fn drain(&self, url: &str) -> Vec<aws_sdk_sqs::types::Message> {
        let mut out = Vec::new();
        loop {
            let received = self
                .client
                .receive_message()
                .queue_url(url)
                .max_number_of_messages(10)
                .message_attribute_names("All")
                .wait_time_seconds(1)
                .send()
                .await
                .unwrap();
            let messages = received.messages.unwrap_or_default();
            if messages.is_empty() {
                return out;
            }
            out.extend(messages);
        }
    }
}

/// Test settings: short leases and heartbeats, a fast scheduler poll.
pub fn settings(queues: &Queues, extra: &[(&str, &str)]) -> Settings {
    let mut vars: HashMap<String, String> = [
        ("RARA_QUEUE_URL", queues.url.as_str()),
        ("RARA_DLQ_URL", queues.dlq_url.as_str()),
        ("RARA_LEASE_SECONDS", "6"),
        ("RARA_HEARTBEAT_SECONDS", "1"),
        ("RARA_VISIBILITY_TIMEOUT_SECONDS", "30"),
        ("RARA_FUNCTION_TIMEOUT_SECONDS", "20"),
        ("RARA_SCHEDULER_POLL_MS", "100"),
        ("RARA_REAP_INTERVAL_MS", "500"),
        ("RARA_PROGRESS_INTERVAL_MS", "100"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    for (k, v) in extra {
        vars.insert((*k).to_owned(), (*v).to_owned());
    }
    Settings::from_lookup("test", |k| vars.get(k).cloned()).expect("test settings")
}

pub async fn submit(store: &Store, settings: &Settings, yaml: &str) -> Uuid {
    let plan = WorkflowDefinition::parse(yaml, Format::Yaml).unwrap().plan(&settings.core).unwrap();
    store.submit(&plan).await.unwrap().run_id
}
