//! The database credentials from a Secrets Manager secret (LocalStack's), as the deployed
//! functions get them: connecting through the secret reaches the local Postgres, the host
//! and name overrides apply, malformed secrets give clear errors, and the password shows
//! up in no error message and no `Debug` output.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;

use rara_domain::config::Config;
use rara_platform::database::{DatabaseSource, Error, SecretsManager};
use rara_platform::wiring::Wiring;
use rara_runtime::settings::Settings;
use rara_store::Store;
use serde_json::json;
use uuid::Uuid;

const PASSWORD: &str = "not-used-by-trust-auth-hunter2";

fn local_secret() -> serde_json::Value {
    json!({
        "engine": "postgres",
        "username": "postgres",
        "password": PASSWORD,
        "host": "127.0.0.1",
        "port": 5432,
        "dbname": "postgres",
    })
}

/// Stores `secret` under a fresh name and returns its ARN.
async fn create_secret(secret: &str) -> String {
    let client = rara_testkit::secrets_client().await;
    let created = client
        .create_secret()
        .name(format!("rara-test-db-{}", Uuid::new_v4().simple()))
        .secret_string(secret)
        .send()
        .await
        .expect("create the secret in LocalStack");
    created.arn().expect("the new secret's ARN").to_owned()
}

async fn fetcher() -> SecretsManager {
    SecretsManager::new(rara_testkit::secrets_client().await)
}

/// The source the functions would read from these `RARA_*` variables (no TLS locally).
fn source(arn: &str, extra: &[(&str, &str)]) -> DatabaseSource {
    let mut vars: HashMap<String, String> = HashMap::new();
    for (key, value) in [("RARA_DATABASE_SECRET_ARN", arn), ("RARA_DATABASE_SSL_MODE", "disable")].iter().chain(extra) {
        vars.insert(key.to_string(), value.to_string());
    }
    let core = Config::from_lookup("test", |k| vars.get(k).cloned()).unwrap();
    DatabaseSource::from_lookup(&core, |k| vars.get(k).cloned()).unwrap()
}

async fn connect(source: &DatabaseSource) -> Result<Store, Error> {
    let options = source.connect_options(&fetcher().await).await?;
    assert_no_password(&format!("{options:?}"));
    Ok(Store::connect_with(options.into_inner(), 2).await.expect("connect to the local Postgres"))
}

fn assert_no_password(shown: &str) {
    assert!(!shown.contains(PASSWORD) && !shown.contains("hunter2"), "the password leaked: {shown}");
}

/// The error of a secret that cannot be used, checked for leaks in `Display` and `Debug`.
async fn refused(secret: &str) -> Error {
    let arn = create_secret(secret).await;
    let err = connect(&source(&arn, &[])).await.expect_err("the secret is refused");
    assert_no_password(&err.to_string());
    assert_no_password(&format!("{err:?}"));
    assert!(err.to_string().contains(&arn), "{err}");
    assert!(!err.is_transient(), "{err}");
    err
}

#[tokio::test]
async fn connecting_through_the_secret_runs_queries() {
    let arn = create_secret(&local_secret().to_string()).await;
    let source = source(&arn, &[]);
    assert_no_password(&format!("{source:?}"));
    let store = connect(&source).await.unwrap();
    let one: i32 = sqlx::query_scalar("SELECT 1").fetch_one(store.pool()).await.unwrap();
    assert_eq!(one, 1);
    assert_no_password(&format!("{store:?}"));
}

#[tokio::test]
async fn the_wiring_connects_through_the_secret() {
    let arn = create_secret(&local_secret().to_string()).await;
    let vars: HashMap<&str, &str> = [("RARA_QUEUE_URL", "http://unused.invalid/queue")].into();
    let settings = Settings::from_lookup("test", |k| vars.get(k).map(|v| v.to_string())).unwrap();
    // The Secrets Manager client comes from the SDK environment, as in a Lambda.
    let wiring = Wiring::connect_to(settings, &source(&arn, &[])).await.unwrap();
    let database: String =
        sqlx::query_scalar("SELECT current_database()").fetch_one(wiring.store.pool()).await.unwrap();
    assert_eq!(database, "postgres");
    assert_no_password(&format!("{wiring:?}"));
}

#[tokio::test]
async fn host_and_name_overrides_replace_the_secrets_values() {
    let mut secret = local_secret();
    secret["host"] = "db.does-not-resolve.invalid".into();
    secret["dbname"] = "no_such_database".into();
    let arn = create_secret(&secret.to_string()).await;
    let overridden = source(&arn, &[("RARA_DATABASE_HOST", "127.0.0.1"), ("RARA_DATABASE_NAME", "postgres")]);
    let store = connect(&overridden).await.unwrap();
    let database: String = sqlx::query_scalar("SELECT current_database()").fetch_one(store.pool()).await.unwrap();
    assert_eq!(database, "postgres");

    // Empty overrides count as unset: the secret's unresolvable host is used.
    let options = source(&arn, &[("RARA_DATABASE_HOST", ""), ("RARA_DATABASE_NAME", " ")])
        .connect_options(&fetcher().await)
        .await
        .unwrap();
    assert_eq!(options.get().get_host(), "db.does-not-resolve.invalid");
    assert_eq!(options.get().get_database(), Some("no_such_database"));
}

#[tokio::test]
async fn a_secret_without_a_password_names_the_field() {
    let mut secret = local_secret();
    secret.as_object_mut().unwrap().remove("password");
    let err = refused(&secret.to_string()).await;
    assert!(matches!(err, Error::MissingField { field: "password", .. }), "{err:?}");
    assert!(err.to_string().contains("has no `password`"), "{err}");
}

#[tokio::test]
async fn a_secret_that_is_not_json_is_refused_clearly() {
    let err = refused(&format!("postgres://postgres:{PASSWORD}@127.0.0.1/postgres")).await;
    assert!(matches!(err, Error::NotJson { .. }), "{err:?}");
    assert!(err.to_string().contains("is not JSON"), "{err}");

    let err = refused(&serde_json::to_string(PASSWORD).unwrap()).await;
    assert!(matches!(err, Error::NotAnObject { .. }), "{err:?}");
}

#[tokio::test]
async fn a_secret_that_does_not_exist_is_a_fetch_error_naming_the_arn() {
    let arn = "arn:aws:secretsmanager:us-east-1:000000000000:secret:rara-test-missing-AbCdEf";
    let err = connect(&source(arn, &[])).await.expect_err("no such secret");
    assert!(matches!(err, Error::Fetch { .. }) && err.is_transient(), "{err:?}");
    let message = err.to_string();
    assert!(message.starts_with(&format!("cannot fetch the database secret {arn}: ")), "{message}");
    assert!(message.contains("ResourceNotFoundException"), "{message}");
}
