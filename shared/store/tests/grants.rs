//! Submit refuses a secret reference no grant permits for the workflow and the step's
//! operation (`SECRET_NOT_GRANTED`, with the field path and the secret's name), storing
//! nothing; a grant of the workflow (or a pattern covering it) lets the same submission in.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use rara_store::{Error, Store};
use sqlx::PgPool;

const BILLING: &str = "name: billing-daily\nsteps:\n  - {name: a, operation: noop}\n  - {name: call, operation: http.request, input: {url: 'https://api.example.com', headers: {authorization: {$secret: stripe}}}}\n";

async fn runs(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM workflow_runs").fetch_one(pool).await.unwrap()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn an_ungranted_secret_is_refused_at_submit_with_its_field_path_and_nothing_is_stored(pool: PgPool) {
    let store = Store::new(pool.clone());
    // Granted elsewhere only: another workflow, another operation, another secret.
    store.grant_secret("stripe", "billing-weekly", "*", None).await.unwrap();
    store.grant_secret("stripe", "*", "noop", None).await.unwrap();
    store.grant_secret("stripe-test", "billing-*", "*", None).await.unwrap();

    let refused = store.submit(&plan(BILLING)).await.unwrap_err();
    match &refused {
        Error::SecretNotGranted { path, secret, workflow, operation } => {
            assert_eq!(path, "steps[1].input.headers.authorization");
            assert_eq!(
                (secret.as_str(), workflow.as_str(), operation.as_str()),
                ("stripe", "billing-daily", "http.request")
            );
        }
        other => panic!("{other:?}"),
    }
    let message = refused.to_string();
    assert!(message.starts_with("steps[1].input.headers.authorization: secret \"stripe\""), "{message}");
    assert!(message.contains("rara secrets grant stripe --workflow billing-daily"), "{message}");
    assert_eq!(runs(&pool).await, 0, "nothing was stored");

    // A pattern covering the workflow, for this operation: granted.
    store.grant_secret("str*", "billing-*", "http.request", Some(&["api.example.com".to_owned()])).await.unwrap();
    store.submit(&plan(BILLING)).await.unwrap();
    assert_eq!(runs(&pool).await, 1);

    // Revoked: refused again; granting the same scope twice keeps one grant.
    assert!(store.revoke_secret("str*", "billing-*", "http.request").await.unwrap());
    assert!(!store.revoke_secret("str*", "billing-*", "http.request").await.unwrap());
    assert!(matches!(store.submit(&plan(BILLING)).await, Err(Error::SecretNotGranted { .. })));
    store.grant_secret("stripe", "billing-daily", "*", None).await.unwrap();
    let again = store.grant_secret("stripe", "billing-daily", "*", Some(&["A.example.com".to_owned()])).await.unwrap();
    assert_eq!(again.hosts, Some(vec!["a.example.com".to_owned()]), "hosts replaced, lower-cased");
    assert_eq!(store.secret_grants().await.unwrap().len(), 4);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_submission_without_secrets_needs_no_grant(pool: PgPool) {
    let store = Store::new(pool.clone());
    store.submit(&plan("name: plain\nsteps:\n  - {name: a, operation: noop}\n")).await.unwrap();
    assert_eq!(runs(&pool).await, 1);
}
