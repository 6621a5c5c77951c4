//! The executor binary started as the template starts it with `RemoteCredentialsSecretArn`:
//! at init it reads the remote executors' credential from Secrets Manager (LocalStack), and
//! presents its token to a Python executor that asks for one (the executor service's
//! `RARA_EXECUTOR_TOKENS`). The fetch is checked by the IAM check against `ExecutorRole`.
//! With another token in the secret the executor is refused and says so; with a malformed
//! secret it does not start and says what is wrong. No run shows the token. Each run then
//! stops: there is no Lambda runtime API to serve.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use rara_testkit::python::{Guard, PythonServer};
use rara_testkit::{Queues, check_iam, secrets_client, with_localstack};
use serde_json::json;

const NEW: &str = "rara-credential-new-0001";
const OLD: &str = "rara-credential-old-0001";

/// A secret of `text` in LocalStack; its ARN.
async fn secret(text: &str) -> String {
    let created = secrets_client()
        .await
        .create_secret()
        .name(format!("rara-test-remote-{}", uuid::Uuid::new_v4().simple()))
        .secret_string(text)
        .send()
        .await
        .unwrap();
    created.arn().unwrap().to_owned()
}

/// Starts the executor binary with the credential secret `arn` against `server`, recording
/// its AWS calls in `calls`; what it printed, and whether it exited successfully.
async fn start_executor(arn: &str, server: &PythonServer, calls: &std::path::Path) -> (String, bool) {
    let queues = Queues::new(30, 5).await;
    let out = with_localstack(std::process::Command::new(env!("CARGO_BIN_EXE_executor")).env_clear())
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
        .env("RARA_QUEUE_URL", &queues.url)
        .env("RARA_DLQ_URL", &queues.dlq_url)
        .env("RARA_REMOTE_EXECUTORS", server.url())
        .env("RARA_REMOTE_CREDENTIALS_SECRET_ARN", arn)
        .env("RARA_AWS_CALL_LOG", calls)
        .output()
        .unwrap();
    let printed = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!printed.contains(NEW) && !printed.contains(OLD), "a token is in the output: {printed}");
    (printed, out.status.success())
}

#[tokio::test]
async fn the_executor_presents_the_token_of_its_credential_secret() {
    let server = PythonServer::start_guarded(&Guard { tokens: vec![NEW.into(), OLD.into()], ..Guard::default() });
    let dir = std::env::temp_dir().join(format!("rara-iam-remote-{}", uuid::Uuid::new_v4().simple()));
    // While rotating, the secret holds the service's list; rara sends the first.
    let arn = secret(&json!({"token": format!("{NEW},{OLD}"), "attempt_key": "a".repeat(40)}).to_string()).await;

    let (printed, _) = start_executor(&arn, &server, &dir).await;
    assert!(printed.contains("capabilities discovered"), "the executor was not let in: {printed}");
    assert!(!printed.contains("capability discovery failed"), "{printed}");
    assert!(!printed.contains("weak security settings"), "token and attempt key both came from the secret: {printed}");

    let (results, passed) = check_iam(&dir);
    let fetch = results
        .iter()
        .find(|r| r["action"] == "secretsmanager:GetSecretValue" && r["resource"] == "Ref:RemoteCredentialsSecretArn")
        .unwrap_or_else(|| panic!("the executor fetched no credential: {results:#?}"));
    assert_eq!((&fetch["role"], &fetch["decision"]), (&json!("ExecutorRole"), &json!("Allowed")), "{fetch:#?}");
    assert!(passed, "a call was denied: {results:#?}");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn another_token_is_refused_and_a_malformed_secret_stops_the_start() {
    let server = PythonServer::start_guarded(&Guard { tokens: vec![NEW.into()], ..Guard::default() });
    let dir = std::env::temp_dir().join(format!("rara-iam-remote-{}", uuid::Uuid::new_v4().simple()));

    let wrong = secret(&json!({"token": OLD}).to_string()).await;
    let (printed, _) = start_executor(&wrong, &server, &dir).await;
    assert!(printed.contains("capability discovery failed") && printed.contains("Unauthenticated"), "{printed}");
    assert!(!printed.contains("capabilities discovered"), "{printed}");

    let malformed = secret(&format!("token={NEW}")).await;
    let (printed, started) = start_executor(&malformed, &server, &dir).await;
    assert!(!started, "{printed}");
    assert!(
        printed.contains("RARA_REMOTE_CREDENTIALS_SECRET_ARN") && printed.contains("is not a JSON object"),
        "{printed}"
    );
    assert!(printed.contains(&malformed), "the error names the secret: {printed}");
    std::fs::remove_dir_all(&dir).ok();
}
