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

/// The router as `main.rs` builds it, with the auth policy of `vars` (behind the IAM function
/// URL, as the template declares, unless `vars` set a token).
fn router(pool: PgPool, vars: &[(&str, &str)]) -> axum::Router {
    let lookup = |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned());
    let iam =
        |k: &str| lookup(k).or_else(|| (k == api::AUTH_VAR && lookup(api::TOKEN_VAR).is_none()).then(|| "iam".into()));
    let policy = api::Policy::from_lookup(iam).unwrap();
    let config = Config::from_lookup("test", |_| None).unwrap();
    let key = rara_api::ConsoleKey::new("a console key of the test, thirty-two characters or more");
    api::router(rara_api::Api::new(rara_store::Store::new(pool), config, policy.auth(&key)).unwrap())
}

/// `fixture(name)` as the caller `arn` (the function URL's `requestContext.authorizer.iam`).
fn fixture_as(name: &str, arn: &str) -> Request {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let mut event: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    event["requestContext"]["authorizer"]["iam"]["userArn"] = Value::String(arn.to_owned());
    lambda_http::request::from_str(&event.to_string()).unwrap()
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

const OPERATOR_ROLE: &str = "arn:aws:iam::123456789012:role/rara-operator";

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn with_operators_named_a_reader_reads_but_its_submit_gets_a_structured_403(pool: PgPool) {
    let router = router(pool.clone(), &[(api::OPERATORS_VAR, OPERATOR_ROLE)]);
    let reader = "arn:aws:iam::123456789012:user/operator";
    let (status, error) = call(&router, fixture_as("submit-run.json", reader)).await;
    assert_eq!((status, error["code"].as_str()), (403, Some("forbidden")), "{error}");
    assert!(error["message"].as_str().unwrap().contains(reader), "{error}");
    let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM workflow_runs").fetch_one(&pool).await.unwrap();
    assert_eq!(runs, 0, "the refused submit stored nothing");
    let (status, page) = call(&router, fixture_as("list-runs.json", reader)).await;
    assert_eq!((status, page["runs"].as_array().map(Vec::len)), (200, Some(0)), "reads stay open: {page}");

    let session = "arn:aws:sts::123456789012:assumed-role/rara-operator/alice";
    let (status, submitted) = call(&router, fixture_as("submit-run.json", session)).await;
    assert_eq!(status, 201, "a session of the operator role acts: {submitted}");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn with_operators_named_a_request_without_an_iam_identity_changes_nothing(pool: PgPool) {
    let router = router(pool.clone(), &[(api::OPERATORS_VAR, OPERATOR_ROLE)]);
    let path = format!("{}/tests/fixtures/submit-run.json", env!("CARGO_MANIFEST_DIR"));
    let mut event: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    event["requestContext"].as_object_mut().unwrap().remove("authorizer");
    let (status, error) = call(&router, lambda_http::request::from_str(&event.to_string()).unwrap()).await;
    assert_eq!((status, error["code"].as_str()), (403, Some("forbidden")), "{error}");
    let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM workflow_runs").fetch_one(&pool).await.unwrap();
    assert_eq!(runs, 0);
}

/// `fixture(name)` as `method` on `path` with `headers` added (a token, a cookie).
fn event_with(name: &str, method: &str, path: &str, headers: &[(&str, &str)]) -> Request {
    let file = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let mut event: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let (raw_path, query) = path.split_once('?').unwrap_or((path, ""));
    event["rawPath"] = raw_path.into();
    event["rawQueryString"] = query.into();
    event.as_object_mut().unwrap().remove("queryStringParameters");
    event["requestContext"]["http"]["method"] = method.into();
    event["requestContext"]["http"]["path"] = raw_path.into();
    for (name, value) in headers {
        event["headers"][*name] = (*value).into();
    }
    lambda_http::request::from_str(&event.to_string()).unwrap()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn with_a_token_a_read_needs_it_or_a_secure_session_from_a_login_url(pool: PgPool) {
    let router = router(pool.clone(), &[(api::TOKEN_VAR, "behind-api-gateway")]);
    let (status, error) = call(&router, fixture("list-runs.json")).await;
    assert_eq!((status, error["code"].as_str()), (401, Some("unauthorized")), "{error}");
    let bearer = [("authorization", "Bearer behind-api-gateway")];
    let (status, _) = call(&router, event_with("list-runs.json", "GET", "/api/runs", &bearer)).await;
    assert_eq!(status, 200);

    let (status, login) = call(&router, event_with("list-runs.json", "POST", "/api/login", &bearer)).await;
    assert_eq!(status, 200, "{login}");
    let url = login["url"].as_str().unwrap();
    assert!(url.starts_with("https://abcdefg.lambda-url.us-east-1.on.aws/login?code="), "{url}");
    let opened =
        router.clone().oneshot(event_with("list-runs.json", "GET", login["path"].as_str().unwrap(), &[])).await;
    let opened = opened.unwrap();
    assert_eq!(opened.status(), 303);
    let cookie = opened.headers()["set-cookie"].to_str().unwrap();
    assert!(cookie.contains("; Secure") && !cookie.contains("behind-api-gateway"), "{cookie}");
    let session = [("cookie", cookie.split(';').next().unwrap())];
    let (status, _) = call(&router, event_with("list-runs.json", "GET", "/api/runs", &session)).await;
    assert_eq!(status, 200, "the session reads");
}
