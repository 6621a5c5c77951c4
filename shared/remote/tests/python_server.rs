//! The client and router against the real Python executor (`executors/python`, run as a
//! subprocess from the venv `scripts/python-env.sh` creates): outputs, progress, artifacts,
//! capabilities, version pinning, cancellation, a server that dies mid-step, and refusals;
//! the server asks for a token (as deployed), and TLS with a private CA is exercised.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use common::*;
use rara_domain::executor::Executor;
use rara_domain::registry::RemoteRouter;
use rara_domain::step_error::codes;
use rara_remote::pb;
use rara_remote::{RemoteExecutor, RemoteExecutors};
use serde_json::json;
use tokio::time::Instant;
use uuid::Uuid;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// The venv's python, created once per test binary by `scripts/python-env.sh`.
fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let out = Command::new("bash")
            .arg("scripts/python-env.sh")
            .current_dir(repo_root())
            .output()
            .expect("scripts/python-env.sh runs");
        assert!(out.status.success(), "python-env.sh failed: {}", String::from_utf8_lossy(&out.stderr));
        let stdout = String::from_utf8(out.stdout).unwrap();
        PathBuf::from(stdout.lines().last().expect("python-env.sh prints the python path").trim())
    })
}

/// `python -m rara_worker` on 127.0.0.1:0; killed (and its files removed) on drop.
struct PythonServer {
    child: Child,
    url: String,
    scratch: PathBuf,
}

/// The tokens the server accepts (a rotation: both at once) and the one rara sends.
const TOKENS: &str = "rara-test-token-current,rara-test-token-next-0000";
const TOKEN: &str = "rara-test-token-next-0000";

/// The test TLS material (`tests/fixtures/tls`, see its README).
fn tls_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tls").join(name)
}

/// How rara talks to the test server: the token, and a key for the attempts' secrets.
fn security() -> rara_remote::Security {
    rara_remote::Security::default().with_token(TOKEN).unwrap().with_attempt_key("k".repeat(32)).unwrap()
}

/// TLS of the server: plaintext, TLS, or TLS asking for client certificates.
#[derive(Clone, Copy, PartialEq)]
enum Tls {
    Off,
    On,
    ClientCertificates,
}

impl PythonServer {
    fn start() -> Self {
        Self::start_with(Tls::Off)
    }

    fn start_with(tls: Tls) -> Self {
        let scratch = std::env::temp_dir().join(format!("rara-remote-test-{}", Uuid::new_v4()));
        std::fs::create_dir_all(&scratch).unwrap();
        let log = std::fs::File::create(scratch.join("server.log")).unwrap();
        let mut command = Command::new(python());
        command.args(["-m", "rara_worker", "--port", "0", "--host", "127.0.0.1"]).env("RARA_EXECUTOR_TOKENS", TOKENS);
        if tls != Tls::Off {
            command.arg("--tls-cert").arg(tls_file("server.pem")).arg("--tls-key").arg(tls_file("server.key"));
        }
        if tls == Tls::ClientCertificates {
            command.arg("--tls-client-ca").arg(tls_file("ca.pem"));
        }
        let mut child = command
            .arg("--artifacts-dir")
            .arg(scratch.join("artifacts"))
            .current_dir(repo_root())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("the Python executor starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let mut server = Self { child, url: String::new(), scratch };
        let line = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_default();
        let Some(address) = line.trim().strip_prefix("listening on ") else {
            let log = std::fs::read_to_string(server.scratch.join("server.log")).unwrap_or_default();
            panic!("the Python executor did not start (first line {line:?}); its log:\n{log}");
        };
        let scheme = if tls == Tls::Off { "http" } else { "https" };
        server.url = format!("{scheme}://{address}");
        server
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.scratch.join("server.log")).unwrap_or_default()
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn router(&self) -> RemoteExecutors {
        self.router_with(security())
    }

    fn router_with(&self, security: rara_remote::Security) -> RemoteExecutors {
        RemoteExecutors::from_config_value_secured(&self.url, rara_remote::Transport::default(), security).unwrap()
    }

    async fn executor(&self, operation: &str) -> std::sync::Arc<RemoteExecutor> {
        self.router().find(operation, None).await.unwrap().expect("the Python executor offers the operation")
    }
}

impl Drop for PythonServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

#[tokio::test]
async fn text_stats_succeeds_with_its_output_progress_in_order_and_an_artifact_with_digest() {
    let server = PythonServer::start();
    let executor = server.executor("text.stats").await;
    assert_eq!(executor.version(), "1.0.0");
    let reporter = RecordingReporter::new();
    let text = (1..=20).map(|i| format!("the cat saw dog number {i}")).collect::<Vec<_>>().join("\n");
    let ctx = context("text.stats", Duration::from_secs(30), reporter.clone());

    let output = executor.execute(ctx, json!({"text": text, "top": 2})).await.unwrap();

    assert_eq!(output["lines"], 20);
    assert_eq!(output["words"], 20 * 6);
    assert_eq!(output["chars"], text.chars().count());
    assert_eq!(output["top_words"], json!([{"word": "cat", "count": 20}, {"word": "dog", "count": 20}]));

    let progress = reporter.progress();
    assert_eq!(progress.len(), 10, "{progress:?}");
    assert!(progress.windows(2).all(|w| w[0].0 < w[1].0), "fractions grow: {progress:?}");
    assert_eq!(progress.last().unwrap(), &(1.0, "counted 20/20 lines".to_owned()));

    let artifacts = reporter.artifacts();
    assert_eq!(artifacts.len(), 1);
    let artifact = &artifacts[0];
    assert_eq!(artifact.name, "stats.json");
    assert_eq!(artifact.media_type.as_deref(), Some("application/json"));
    let digest = artifact.digest.as_deref().unwrap();
    let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
    assert!(hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit()), "{digest}");
    let path = artifact.uri.strip_prefix("file://").expect("a file URI");
    let content = std::fs::read(path).unwrap();
    assert_eq!(Some(content.len() as i64), artifact.size_bytes);
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&content).unwrap(), output, "the artifact holds the output");
    assert_eq!(
        reporter.reports().last(),
        Some(&Report::Artifact(artifact.clone())),
        "the artifact is reported after the progress"
    );
}

#[tokio::test]
async fn capabilities_are_listed_with_name_and_version() {
    let server = PythonServer::start();
    let mut offered: Vec<(String, String)> =
        server.router().capabilities().await.into_iter().map(|c| (c.name, c.version)).collect();
    offered.sort();
    let expected = [
        ("dataset.split", "1.0.0"),
        ("sleep", "1.0.0"),
        ("stats.merge", "1.0.0"),
        ("text.split", "1.0.0"),
        ("text.stats", "1.0.0"),
    ];
    assert_eq!(offered, expected.map(|(n, v)| (n.to_owned(), v.to_owned())));
}

#[tokio::test]
async fn a_pinned_version_no_server_offers_is_not_routed() {
    let server = PythonServer::start();
    let router = server.router();
    assert!(router.route("text.stats", Some("1.0.0")).await.unwrap().is_some());
    let Err(err) = router.route("text.stats", Some("9.9.9")).await else { panic!("9.9.9 is not offered") };
    assert_eq!((err.code.as_str(), err.retryable), (rara_domain::step_error::codes::VERSION_UNAVAILABLE, true));
    assert!(router.route("no.such.operation", None).await.unwrap().is_none());
}

#[tokio::test]
async fn cancelling_sleep_mid_run_ends_promptly_and_the_python_attempt_stops() {
    let server = PythonServer::start();
    let executor = server.executor("sleep").await;
    let reporter = RecordingReporter::new();
    let ctx = context("sleep", Duration::from_secs(60), reporter.clone());
    let (cancel, step_id) = (ctx.cancel.clone(), ctx.step_id);
    let started = Instant::now();
    let call = tokio::spawn(async move { executor.execute(ctx, json!({"seconds": 30})).await });
    reporter.wait_for_progress().await;
    cancel.cancel();

    let err = call.await.unwrap().expect_err("a cancelled step fails");
    assert_eq!((err.code.as_str(), err.retryable), (codes::CANCELLED, false), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(10), "ended well before the 30 s sleep: {:?}", started.elapsed());

    // The Python side forgets an attempt only when its task has ended.
    let mut client = security().client(rara_remote::router::lazy_channel(&server.url).unwrap());
    let attempt_secret = security().attempt_secret(step_id, 1);
    let ask = pb::CancelRequest { step_id: step_id.to_string(), attempt: 1, reason: "probe".into(), attempt_secret };
    let deadline = Instant::now() + Duration::from_secs(5);
    while client.cancel(ask.clone()).await.unwrap().into_inner().found {
        assert!(Instant::now() < deadline, "the Python attempt is still running");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let reported = reporter.progress().len();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(reporter.progress().len(), reported, "no progress after the cancellation");
}

#[tokio::test]
async fn killing_the_python_server_mid_sleep_is_retryable_unavailability() {
    let mut server = PythonServer::start();
    let executor = server.executor("sleep").await;
    let reporter = RecordingReporter::new();
    let ctx = context("sleep", Duration::from_secs(60), reporter.clone());
    let started = Instant::now();
    let call = tokio::spawn(async move { executor.execute(ctx, json!({"seconds": 30})).await });
    reporter.wait_for_progress().await;
    server.kill();

    let err = call.await.unwrap().expect_err("the step cannot succeed");
    assert_eq!((err.code.as_str(), err.retryable), (codes::EXECUTOR_UNAVAILABLE, true), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
}

#[tokio::test]
async fn an_unknown_operation_sent_to_execute_is_a_permanent_failure() {
    let server = PythonServer::start();
    let channel = rara_remote::router::lazy_channel(&server.url).unwrap();
    let executor = RemoteExecutor::new(channel, server.url.clone(), "no.such.operation", "1.0.0")
        .with_security(std::sync::Arc::new(security()));
    let ctx = context("no.such.operation", Duration::from_secs(30), RecordingReporter::new());
    let err = executor.execute(ctx, json!({})).await.expect_err("no such operation");
    assert_eq!((err.code.as_str(), err.retryable), (codes::UNKNOWN_OPERATION, false), "{err:?}");
    assert_eq!(err.details["operation"], "no.such.operation");
}

#[tokio::test]
async fn invalid_input_is_a_permanent_failure() {
    let server = PythonServer::start();
    let executor = server.executor("sleep").await;
    let ctx = context("sleep", Duration::from_secs(30), RecordingReporter::new());
    let err = executor.execute(ctx, json!({"seconds": "soon"})).await.expect_err("bad input");
    assert_eq!((err.code.as_str(), err.retryable), (codes::INVALID_INPUT, false), "{err:?}");
}

#[tokio::test]
async fn a_step_past_its_deadline_is_retryable() {
    let server = PythonServer::start();
    let executor = server.executor("sleep").await;
    let ctx = context("sleep", Duration::from_secs(1), RecordingReporter::new());
    let started = Instant::now();
    let err = executor.execute(ctx, json!({"seconds": 20})).await.expect_err("too slow");
    assert_eq!((err.code.as_str(), err.retryable), (codes::DEADLINE_EXCEEDED, true), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
}

/// A step quiet for longer than the idle timeout (`sleep` reports progress once a second;
/// the idle timeout here is 300 ms) still succeeds: the Python executor's heartbeats keep
/// its stream alive. Without them the attempt would end as EXECUTOR_UNAVAILABLE.
#[tokio::test]
async fn heartbeats_keep_a_quiet_step_alive_past_the_idle_timeout() {
    let server = PythonServer::start();
    let executor = (*server.executor("sleep").await).clone().with_heartbeat_interval(Duration::from_millis(100));
    let reporter = RecordingReporter::new();
    let ctx = context("sleep", Duration::from_secs(30), reporter.clone());
    let output = executor.execute(ctx, json!({"seconds": 2})).await.expect("the quiet step succeeds");
    assert!(output.is_object(), "{output}");
    let reports = reporter.progress();
    assert!(reports.len() >= 2, "progress came at most once a second: {reports:?}");
}

#[tokio::test]
async fn without_the_token_every_call_is_unauthenticated_and_no_handler_runs() {
    let server = PythonServer::start();
    // No token: discovery is refused, so nothing routes (the endpoint never answered).
    let anonymous = rara_remote::Security::default();
    let err = server.router_with(anonymous.clone()).route("sleep", None).await.err().expect("not routed");
    assert_eq!((err.code.as_str(), err.retryable), (codes::EXECUTOR_UNAVAILABLE, true), "{err:?}");
    // Execute, Attach and Cancel straight from a client without the credential.
    let channel = rara_remote::router::lazy_channel(&server.url).unwrap();
    let executor = RemoteExecutor::new(channel.clone(), server.url.clone(), "sleep", "1.0.0");
    let ctx = context("sleep", Duration::from_secs(30), RecordingReporter::new());
    let step_id = ctx.step_id;
    let err = executor.execute(ctx, json!({"seconds": 1})).await.expect_err("refused");
    assert_eq!(err.code, codes::EXECUTOR_UNAVAILABLE, "{err:?}");
    assert!(err.message.contains("Unauthenticated") && err.message.contains(&server.url), "{}", err.message);
    assert!(err.message.contains("RARA_REMOTE_TOKEN"), "{}", err.message);
    let mut client = anonymous.client(channel);
    let attach = pb::AttachRequest { step_id: step_id.to_string(), attempt: 1, fence: 1, ..Default::default() };
    let status = client.attach(attach).await.expect_err("refused");
    assert_eq!(status.code(), tonic::Code::Unauthenticated);
    let cancel = pb::CancelRequest { step_id: step_id.to_string(), attempt: 1, ..Default::default() };
    let status = client.cancel(cancel).await.expect_err("refused");
    assert_eq!(status.code(), tonic::Code::Unauthenticated);

    let log = server.log();
    for method in ["GetCapabilities", "Execute", "Attach", "Cancel"] {
        let line = format!("unauthenticated call refused method=/rara.v1.ExecutorService/{method} ");
        assert!(log.contains(&line), "{method} was refused:\n{log}");
    }
    for handler in ["execute operation=", "attach step=", "attach refused", "cancel step="] {
        assert!(!log.contains(handler), "a handler ran ({handler}):\n{log}");
    }
    assert!(!log.contains("rara-test-token"), "the log holds no token:\n{log}");
}

#[tokio::test]
async fn a_forged_execute_with_a_larger_fence_does_not_stop_rara_s_attempt() {
    let server = PythonServer::start();
    let executor = server.executor("sleep").await;
    let reporter = RecordingReporter::new();
    let ctx = context("sleep", Duration::from_secs(30), reporter.clone());
    let (step_id, fence) = (ctx.step_id, ctx.fence);
    let call = tokio::spawn(async move { executor.execute(ctx, json!({"seconds": 1})).await });
    reporter.wait_for_progress().await;

    // A peer with the token, not the secrets: a larger fence, Attach, Cancel.
    let mut forger = security().client(rara_remote::router::lazy_channel(&server.url).unwrap());
    let forged = pb::ExecuteRequest {
        run_id: Uuid::new_v4().to_string(),
        step_id: step_id.to_string(),
        attempt: 2,
        fence: fence + 1_000_000,
        operation: "sleep".into(),
        input_json: r#"{"seconds": 1}"#.into(),
        attempt_secret: "f".repeat(64),
        prior_attempt_secrets: vec!["0".repeat(64)],
        ..Default::default()
    };
    let mut forged_stream = forger.execute(forged).await.unwrap().into_inner();
    while let Some(event) = forged_stream.message().await.unwrap() {
        if matches!(event.event, Some(pb::execute_response::Event::Running(_))) {
            break;
        }
    }
    let wrong = "b".repeat(64);
    let attach = pb::AttachRequest {
        step_id: step_id.to_string(),
        attempt: 1,
        fence,
        attempt_secret: wrong.clone(),
        ..Default::default()
    };
    let status = forger.attach(attach).await.expect_err("refused");
    assert_eq!(status.code(), tonic::Code::PermissionDenied);
    let cancel =
        pb::CancelRequest { step_id: step_id.to_string(), attempt: 1, attempt_secret: wrong, ..Default::default() };
    let status = forger.cancel(cancel).await.expect_err("refused");
    assert_eq!(status.code(), tonic::Code::PermissionDenied);

    let output = call.await.unwrap().expect("rara's attempt succeeds");
    assert_eq!((output["slept_seconds"].as_f64(), output["cancelled"].as_bool()), (Some(1.0), Some(false)), "{output}");
    let log = server.log();
    assert!(log.contains("not superseded (no proof of its secret)"), "{log}");
    assert!(!log.contains("superseded step="), "rara's attempt was not superseded:\n{log}");
}

#[tokio::test]
async fn rara_runs_a_step_over_tls_with_a_private_ca_and_a_client_certificate() {
    for tls in [Tls::On, Tls::ClientCertificates] {
        let server = PythonServer::start_with(tls);
        let ca = std::fs::read(tls_file("ca.pem")).unwrap();
        let cert = std::fs::read(tls_file("client.pem")).unwrap();
        let key = std::fs::read_to_string(tls_file("client.key")).unwrap();
        let security = security().with_ca_pem(ca).with_identity_pem(cert, key);
        let executor = server.router_with(security).find("text.stats", None).await.unwrap().expect("routed over TLS");
        let ctx = context("text.stats", Duration::from_secs(30), RecordingReporter::new());
        let output = executor.execute(ctx, json!({"text": "a b"})).await.unwrap();
        assert_eq!(output["words"], 2, "{output}");
    }
}

#[tokio::test]
async fn a_wrong_ca_or_a_missing_client_certificate_fails_naming_the_endpoint() {
    let wrong_ca = std::fs::read(tls_file("wrong-ca.pem")).unwrap();
    let right_ca = std::fs::read(tls_file("ca.pem")).unwrap();
    for (tls, ca) in [(Tls::On, wrong_ca), (Tls::ClientCertificates, right_ca)] {
        let server = PythonServer::start_with(tls);
        let security = security().with_ca_pem(ca);
        let channel = rara_remote::router::lazy_channel_with(&server.url, &security).unwrap();
        let executor = RemoteExecutor::new(channel, server.url.clone(), "text.stats", "1.0.0")
            .with_security(std::sync::Arc::new(security));
        let ctx = context("text.stats", Duration::from_secs(10), RecordingReporter::new());
        let err = executor.execute(ctx, json!({"text": "a b"})).await.expect_err("TLS refused");
        assert_eq!((err.code.as_str(), err.retryable), (codes::EXECUTOR_UNAVAILABLE, true), "{err:?}");
        assert!(err.message.contains(&server.url), "the error names the endpoint: {}", err.message);
        if tls == Tls::On {
            assert!(
                err.message.contains("UnknownIssuer") && err.message.contains("RARA_REMOTE_CA_FILE"),
                "{}",
                err.message
            );
        }
        assert_eq!(err.details["endpoint"], server.url.as_str());
        assert!(!server.log().contains("execute operation="), "no handler ran");
    }
}
