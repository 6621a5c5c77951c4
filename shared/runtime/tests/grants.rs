//! Secrets are granted, not ambient: through the scheduler and executor runners (Postgres,
//! LocalStack's SQS), a granted secret reaches the host its step calls; a grant revoked after
//! submit fails the step at claim (`SECRET_NOT_GRANTED`, permanent) and a grant restricted to
//! host A refuses a step sending the secret to host B, both before the secret is resolved or
//! any request is made (the servers' logs and the resolver's count say so).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use rara_domain::step_error::codes;
use rara_runtime::secrets::{self, SecretResolver};
use rara_store::Store;
use rara_store::read::StepView;
use sqlx::PgPool;
use uuid::Uuid;

const SECRET: &str = "gr4nted-value-51c2";
const LIMIT: Duration = Duration::from_secs(60);

/// `api` resolves to [`SECRET`]; counts every resolution.
#[derive(Default)]
struct CountingVault(AtomicUsize);

#[async_trait::async_trait]
impl SecretResolver for CountingVault {
    async fn resolve(&self, name: &str) -> Result<String, secrets::Error> {
        self.0.fetch_add(1, Ordering::SeqCst);
        match name {
            "api" => Ok(SECRET.to_owned()),
            _ => Err(secrets::Error::NotFound { name: name.to_owned() }),
        }
    }
}

/// A server on 127.0.0.1 keeping the `authorization` header of every request to `/echo`.
async fn server() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let received = Arc::new(Mutex::new(Vec::new()));
    let log = received.clone();
    let app = axum::Router::new().route(
        "/echo",
        axum::routing::get(move |headers: axum::http::HeaderMap| {
            let log = log.clone();
            async move {
                let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
                log.lock().unwrap().push(auth);
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, received)
}

/// The servers are on loopback, which the egress policy of `http.request` opens only when told.
const LOOPBACK: &[(&str, &str)] = &[("RARA_HTTP_ALLOW_CIDRS", "127.0.0.1/32")];

fn call(name: &str, url: &str) -> String {
    format!(
        "  - {{name: {name}, operation: http.request, max_attempts: 3, input: {{url: '{url}', headers: {{authorization: {{$secret: api}}}}}}}}\n"
    )
}

async fn step(store: &Store, run_id: Uuid, name: &str) -> StepView {
    store.run(run_id).await.unwrap().steps.into_iter().find(|s| s.name == name).unwrap()
}

fn assert_not_granted(step: &StepView, needle: &str) {
    let error = step.error.as_ref().unwrap();
    assert_eq!((error.code.as_str(), error.retryable), (codes::SECRET_NOT_GRANTED, false), "{error:?}");
    assert_eq!(error.details["secret"], "api", "{error:?}");
    assert!(error.message.contains(needle), "{error:?}");
    assert_eq!((step.status.to_string().as_str(), step.attempt), ("failed", 1), "permanent: not retried");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_granted_secret_is_sent_and_one_revoked_after_submit_fails_at_claim_sending_nothing(pool: PgPool) {
    let (addr, received) = server().await;
    let (store, _queues, mut stack) = Stack::fresh(pool, LOOPBACK).await;
    let vault = Arc::new(CountingVault::default());
    stack.executor = stack.executor.clone().with_secrets(vault.clone());
    let url = format!("http://{addr}/echo");
    for workflow in ["granted", "revoked"] {
        store.grant_secret("api", workflow, "http.request", None).await.unwrap();
    }
    let granted = submit(&store, &stack.settings, &format!("name: granted\nsteps:\n{}", call("call", &url))).await;
    let revoked = submit(&store, &stack.settings, &format!("name: revoked\nsteps:\n{}", call("call", &url))).await;
    assert!(store.revoke_secret("api", "revoked", "http.request").await.unwrap());

    let (status, _) = stack.run_until_finished(granted, LIMIT).await;
    assert_eq!(status, "succeeded");
    assert_eq!(*received.lock().unwrap(), [SECRET], "the granted secret reached its host once");
    assert_eq!(vault.0.load(Ordering::SeqCst), 1);

    let (status, _) = stack.run_until_finished(revoked, LIMIT).await;
    assert_eq!(status, "failed");
    assert_not_granted(&step(&store, revoked, "call").await, "\"revoked\"");
    assert_eq!(received.lock().unwrap().len(), 1, "nothing was sent for the revoked grant");
    assert_eq!(vault.0.load(Ordering::SeqCst), 1, "nothing was resolved for the revoked grant");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_grant_restricted_to_one_host_refuses_another_before_any_request(pool: PgPool) {
    let (a, received_a) = server().await;
    let (b, received_b) = server().await;
    let (store, _queues, mut stack) = Stack::fresh(pool, LOOPBACK).await;
    let vault = Arc::new(CountingVault::default());
    stack.executor = stack.executor.clone().with_secrets(vault.clone());
    let hosts = ["127.0.0.1".to_owned()];
    store.grant_secret("api", "hosts", "http.request", Some(&hosts)).await.unwrap();
    // Host B is `localhost` (the second server's port): another host, refused before it is
    // resolved or connected to.
    let yaml = format!(
        "name: hosts\nsteps:\n{}{}",
        call("to_a", &format!("http://{a}/echo")),
        call("to_b", &format!("http://localhost:{}/echo", b.port()))
    );
    let run_id = submit(&store, &stack.settings, &yaml).await;

    let (status, _) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "failed");
    assert_eq!(step(&store, run_id, "to_a").await.status.to_string(), "succeeded");
    assert_not_granted(&step(&store, run_id, "to_b").await, "\"localhost\"");
    assert_eq!(*received_a.lock().unwrap(), [SECRET]);
    assert!(received_b.lock().unwrap().is_empty(), "host B received a request");
    assert_eq!(vault.0.load(Ordering::SeqCst), 1, "only host A's step resolved the secret");
}
