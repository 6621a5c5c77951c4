//! The Secrets Manager backend of `{"$secret": name}` references against LocalStack's Secrets
//! Manager: a prefixed name resolves, a missing one is named; an ARN or a name that would leave
//! the prefix is refused without a call, even for a secret that exists.
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

    let resolver = SecretsManagerResolver::new(client, prefix).unwrap();
    assert_eq!(resolver.resolve("api").await.unwrap(), SECRET);
    let missing = resolver.resolve("nope").await.unwrap_err();
    assert!(matches!(&missing, secrets::Error::NotFound { name } if name == "nope"), "{missing:?}");
    let error = missing.to_step_error();
    assert_eq!((error.code.as_str(), error.retryable), (codes::SECRET_NOT_FOUND, false));
}

#[tokio::test]
async fn an_arn_or_a_name_outside_the_prefix_is_refused_for_good_naming_it() {
    let client = secrets_client().await;
    let prefix = format!("rara-test-{}/", uuid::Uuid::new_v4().simple());
    // A secret outside the prefix, reachable by its ARN or its own name if names were ids.
    let outside = format!("rara-other-{}", uuid::Uuid::new_v4().simple());
    let created = client.create_secret().name(&outside).secret_string(SECRET).send().await.unwrap();
    let arn = created.arn.unwrap();

    let resolver = SecretsManagerResolver::new(client.clone(), prefix).unwrap();
    for name in [arn.as_str(), &format!("/{outside}"), "a:b", "/x"] {
        let refused = resolver.resolve(name).await.unwrap_err();
        assert!(matches!(&refused, secrets::Error::InvalidName { name: n, .. } if n == name), "{name}: {refused:?}");
        let error = refused.to_step_error();
        assert_eq!((error.code.as_str(), error.retryable), (codes::INVALID_INPUT, false), "{name}");
        assert_eq!(error.details["secret"], name, "the error names the secret");
        assert!(!format!("{error:?}").contains(SECRET), "{error:?}");
    }
    // The name alone is read under the prefix, where it does not exist.
    let missing = resolver.resolve(&outside).await.unwrap_err();
    assert!(matches!(missing, secrets::Error::NotFound { .. }), "{missing:?}");
    assert!(SecretsManagerResolver::new(client, "").is_err(), "an empty prefix is refused");
}
