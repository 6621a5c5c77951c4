//! The API's cancel of a detached attempt against the real Python executor with auth on: the
//! API presents the remote token and the attempt's secret as the executor does
//! (`Api::with_remote_security`), and the attempt stops (one run, or a bulk cancel); an API
//! without them is refused `UNAUTHENTICATED` and the attempt runs on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use axum::http::StatusCode;
use common::*;
use rara_remote::{Security, pb};
use rara_store::Store;
use rara_testkit::python::{Guard, PythonServer};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

const REMOTE_TOKEN: &str = "rara-api-cancel-token-0001";

fn security() -> Security {
    Security::default().with_token(REMOTE_TOKEN).unwrap().with_attempt_key("c".repeat(40)).unwrap()
}

/// A run of one `sleep` step whose first attempt runs on `server` as the executor starts it
/// (`Execute` with the token and the attempt's secret) and then leaves it detached; the run,
/// the step and the open `Execute` stream (dropping it would not stop the attempt either).
async fn detached_sleep(pool: &PgPool, server: &PythonServer) -> (Uuid, Uuid, tonic::Streaming<pb::ExecuteResponse>) {
    let store = Store::new(pool.clone());
    let config = rara_domain::config::Config::from_lookup("test", |_| None).unwrap();
    let definition = "name: detached\nsteps:\n  - {name: train, operation: sleep}\n";
    let plan = rara_domain::workflow::WorkflowDefinition::parse(definition, rara_domain::workflow::Format::Yaml)
        .unwrap()
        .plan(&config)
        .unwrap();
    let run = store.submit(&plan).await.unwrap().run_id;
    let step: Uuid = sqlx::query_scalar("SELECT step_id FROM step_names WHERE run_id = $1 AND name = 'train'")
        .bind(run)
        .fetch_one(pool)
        .await
        .unwrap();
    // What the executor's park leaves: leased, the first attempt running on the endpoint.
    let fence: i64 = sqlx::query_scalar(
        "WITH s AS (UPDATE steps SET status = 'leased', attempt = 1, fence = nextval('rara_fence_seq'),
                    lease_token = gen_random_uuid(), leased_by = 'w', remote_endpoint = $2, remote_sequence = 0,
                    lease_expires_at = now() + interval '1 hour'
                    WHERE id = $1 RETURNING id, fence, lease_token)
         INSERT INTO step_attempts (step_id, attempt, fence, leased_by, lease_token, remote_endpoint)
         SELECT id, 1, fence, 'w', lease_token, $2 FROM s RETURNING fence",
    )
    .bind(step)
    .bind(server.url())
    .fetch_one(pool)
    .await
    .unwrap();
    let channel = rara_remote::router::lazy_channel(server.url()).unwrap();
    let mut client = security().client(channel);
    let execute = pb::ExecuteRequest {
        run_id: run.to_string(),
        step_id: step.to_string(),
        attempt: 1,
        fence,
        operation: "sleep".into(),
        input_json: json!({"seconds": 60}).to_string(),
        attempt_secret: security().attempt_secret(step, 1),
        ..Default::default()
    };
    let mut stream = client.execute(execute).await.unwrap().into_inner();
    while let Some(event) = stream.message().await.unwrap() {
        if matches!(event.event, Some(pb::execute_response::Event::Running(_))) {
            break;
        }
    }
    (run, step, stream)
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_apis_cancel_presents_the_token_and_the_attempt_secret(pool: PgPool) {
    let server = PythonServer::start_guarded(&Guard { tokens: vec![REMOTE_TOKEN.into()], ..Guard::default() });
    let (run, step, _stream) = detached_sleep(&pool, &server).await;

    let client = Client { router: api(pool.clone()).with_remote_security(security()).router() };
    let (status, body) = client.post(&format!("/api/runs/{run}/cancel"), json!({"reason": "no longer needed"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["cancelled_steps"], 1, "{body}");
    let told = format!("cancel step={step} attempt=1 found=True");
    assert!(server.wait_for_log(&told, Duration::from_secs(10)), "the attempt was not stopped:\n{}", server.log());
    assert!(!server.log().contains("unauthenticated call refused"), "{}", server.log());
    assert!(!server.log().contains(REMOTE_TOKEN), "the log holds no token");

    // The bulk cancel tells its detached attempts the same way.
    let (_, bulk_step, _bulk_stream) = detached_sleep(&pool, &server).await;
    let (status, body) = client.post("/api/bulk/cancel", json!({"name": "detached", "reason": "maintenance"})).await;
    assert_eq!((status, body["changed"].as_u64()), (StatusCode::OK, Some(1)), "{body}");
    let told = format!("cancel step={bulk_step} attempt=1 found=True");
    assert!(server.wait_for_log(&told, Duration::from_secs(10)), "the bulk cancel did not stop it:\n{}", server.log());
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn an_api_without_the_credential_is_refused_and_the_attempt_runs_on(pool: PgPool) {
    let server = PythonServer::start_guarded(&Guard { tokens: vec![REMOTE_TOKEN.into()], ..Guard::default() });
    let (run, step, _stream) = detached_sleep(&pool, &server).await;

    let client = Client::new(pool.clone());
    let (status, body) = client.post(&format!("/api/runs/{run}/cancel"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "the run is cancelled in the database all the same: {body}");
    let refused = "unauthenticated call refused method=/rara.v1.ExecutorService/Cancel ";
    assert!(server.wait_for_log(refused, Duration::from_secs(10)), "{}", server.log());
    assert!(!server.log().contains(&format!("cancel step={step}")), "no handler ran:\n{}", server.log());
    // The attempt still runs there: with the credentials it is found.
    let mut client = security().client(rara_remote::router::lazy_channel(server.url()).unwrap());
    let cancel = pb::CancelRequest {
        step_id: step.to_string(),
        attempt: 1,
        attempt_secret: security().attempt_secret(step, 1),
        ..Default::default()
    };
    assert!(client.cancel(cancel).await.unwrap().into_inner().found, "the attempt ran on");
}
