//! The API function's AWS calls, checked against its role: the binary starts as Lambda starts
//! it (`RARA_DATABASE_SECRET_ARN`, no `DATABASE_URL`; `RARA_API_AUTH=iam` and the console
//! key's secret as the template sets them), reads its three secrets from LocalStack at init (the
//! database's, the console key's, and the remote executors' credential its cancel presents), and
//! every call it made is evaluated by the IAM check
//! (`scripts/check-iam.sh`) against ApiRole in infra/template.yaml. It then stops: there is no
//! Lambda runtime API to serve.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use rara_testkit::{check_iam, endpoint, secrets_client, with_localstack};
use serde_json::json;

#[tokio::test]
async fn at_init_the_api_reads_its_three_secrets_and_its_role_allows_them() {
    let secret = json!({"engine": "postgres", "username": "postgres", "password": "unused-trust-auth",
        "host": "127.0.0.1", "port": 5432, "dbname": "postgres"});
    let created = secrets_client()
        .await
        .create_secret()
        .name(format!("rara-test-db-{}", uuid::Uuid::new_v4().simple()))
        .secret_string(secret.to_string())
        .send()
        .await
        .unwrap();
    let arn = created.arn().unwrap();
    let console_key = secrets_client()
        .await
        .create_secret()
        .name(format!("rara-test-console-key-{}", uuid::Uuid::new_v4().simple()))
        .secret_string(uuid::Uuid::new_v4().simple().to_string())
        .send()
        .await
        .unwrap();
    let remote = secrets_client()
        .await
        .create_secret()
        .name(format!("rara-test-remote-{}", uuid::Uuid::new_v4().simple()))
        .secret_string(json!({"token": "rara-api-iam-token-0001", "attempt_key": "i".repeat(40)}).to_string())
        .send()
        .await
        .unwrap();
    let dir = std::env::temp_dir().join(format!("rara-iam-api-{}", uuid::Uuid::new_v4().simple()));

    let out = with_localstack(std::process::Command::new(env!("CARGO_BIN_EXE_api")).env_clear())
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RARA_AWS_CALL_LOG", &dir)
        .env("RARA_DATABASE_SECRET_ARN", arn)
        .env("RARA_DATABASE_SSL_MODE", "disable")
        .env("RARA_API_AUTH", "iam")
        .env("RARA_CONSOLE_KEY_SECRET_ARN", console_key.arn().unwrap())
        .env("RARA_REMOTE_CREDENTIALS_SECRET_ARN", remote.arn().unwrap())
        // The template gives every function the queue's URL; the API sends nothing to it.
        .env("RARA_QUEUE_URL", format!("{}/000000000000/rara-test-api", endpoint()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("unused-trust-auth"), "the password is in the output: {stderr}");
    assert!(!stderr.contains("rara-api-iam-token-0001"), "the remote token is in the output: {stderr}");

    let (results, passed) = check_iam(&dir);
    for (secret, site) in [
        ("Ref:DatabaseSecretArn", "functions/api/src/"),
        ("Ref:ConsoleKeySecret", "functions/api/src/"),
        ("Ref:RemoteCredentialsSecretArn", "functions/api/src/"),
    ] {
        let fetch = results
            .iter()
            .find(|r| {
                r["role"] == "ApiRole" && r["action"] == "secretsmanager:GetSecretValue" && r["resource"] == secret
            })
            .unwrap_or_else(|| panic!("the api did not fetch {secret}: {results:#?}; it said: {stderr}"));
        assert_eq!(fetch["decision"], "Allowed", "{fetch:#?}");
        let sites = fetch["sites"].as_object().unwrap();
        assert!(sites.keys().all(|s| s.starts_with(site)), "{fetch:#?}");
    }
    assert!(passed, "a call was denied: {results:#?}");
    std::fs::remove_dir_all(&dir).ok();
}
