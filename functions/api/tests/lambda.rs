//! The `api` Lambda's router answering function URL events (the committed fixtures of
//! `tests/fixtures/`, payload format 2.0, as `lambda_http` parses them) over a real Postgres.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use http_body_util::BodyExt;
use lambda_http::Request;
use rara_domain::config::Config;
use serde_json::Value;
use sqlx::PgPool;
use tower::ServiceExt;

fn fixture(name: &str) -> Request {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    lambda_http::request::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The router as `main.rs` builds it, with the auth policy of `vars`.
fn router(pool: PgPool, vars: &[(&str, &str)]) -> axum::Router {
    let auth = api::auth_from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned()));
    let config = Config::from_lookup("test", |_| None).unwrap();
    rara_api::Api::new(rara_store::Store::new(pool), config, auth).unwrap().router()
}

async fn call(router: &axum::Router, request: Request) -> (u16, Value) {
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_function_url_event_submits_and_lists_runs_under_iam_auth(pool: PgPool) {
    let router = router(pool, &[]);
    let (status, submitted) = call(&router, fixture("submit-run.json")).await;
    assert_eq!(status, 201, "{submitted}");
    let (status, again) = call(&router, fixture("submit-run.json")).await;
    assert_eq!((status, &again["id"]), (200, &submitted["id"]), "the idempotency key holds");
    let (status, page) = call(&router, fixture("list-runs.json")).await;
    assert_eq!(status, 200);
    assert_eq!(page["runs"].as_array().unwrap().len(), 1);
    assert_eq!(page["runs"][0]["name"], "from-lambda");
    let (status, document) = call(&router, fixture("openapi.json")).await;
    assert_eq!(status, 200);
    assert!(document["paths"]["/api/runs/{id}"].is_object());
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_bad_event_body_gets_a_structured_error_and_stores_nothing(pool: PgPool) {
    let router = router(pool.clone(), &[]);
    let (status, error) = call(&router, fixture("submit-unknown-field.json")).await;
    assert_eq!(status, 400);
    assert_eq!((error["code"].as_str(), error["field"].as_str()), (Some("bad_request"), Some("priority")));
    let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM workflow_runs").fetch_one(&pool).await.unwrap();
    assert_eq!(runs, 0);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn with_rara_api_token_set_an_event_without_the_token_is_refused(pool: PgPool) {
    let router = router(pool.clone(), &[(api::TOKEN_VAR, "behind-api-gateway")]);
    let (status, error) = call(&router, fixture("submit-run.json")).await;
    assert_eq!((status, error["code"].as_str()), (401, Some("unauthorized")));
    let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM workflow_runs").fetch_one(&pool).await.unwrap();
    assert_eq!(runs, 0);
}
