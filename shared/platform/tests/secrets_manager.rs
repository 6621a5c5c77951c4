//! The Secrets Manager backend of `{"$secret": name}` references against LocalStack's Secrets
//! Manager: a prefixed name resolves, a missing one is named.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use rara_domain::step_error::codes;
use rara_platform::secrets::SecretsManagerResolver;
use rara_runtime::secrets::{self, SecretResolver};
use rara_testkit::secrets_client;

const SECRET: &str = "s3cr3t-value-7f9a";

#[tokio::test]
async fn secrets_manager_resolves_by_prefixed_name_and_names_a_missing_secret() {
    let client = secrets_client().await;
    let prefix = format!("rara-test-{}/", uuid::Uuid::new_v4().simple());
    client.create_secret().name(format!("{prefix}api")).secret_string(SECRET).send().await.unwrap();

    let resolver = SecretsManagerResolver::new(client, prefix);
    assert_eq!(resolver.resolve("api").await.unwrap(), SECRET);
    let missing = resolver.resolve("nope").await.unwrap_err();
    assert!(matches!(&missing, secrets::Error::NotFound { name } if name == "nope"), "{missing:?}");
    let error = missing.to_step_error();
    assert_eq!((error.code.as_str(), error.retryable), (codes::SECRET_NOT_FOUND, false));
}
