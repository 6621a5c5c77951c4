//! `GET /api/artifacts/{id}`: refused without authentication; from S3 (LocalStack) a redirect to
//! a presigned URL that downloads the object without credentials; from a directory the bytes,
//! as an attachment of `application/octet-stream`; never an object outside the store or its run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use common::*;
use http_body_util::BodyExt;
use rara_artifacts::port::reader_of;
use rara_artifacts::{ArtifactStore, Key};
use serde_json::json;
use sqlx::PgPool;
use tower::ServiceExt;
use uuid::Uuid;

/// A run of one step, submitted through the API: (run id, step id).
async fn one_step_run(client: &Client, pool: &PgPool) -> (Uuid, Uuid) {
    let (status, body) = client.post("/api/runs", json!({"definition": demo_definition()})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let run_id: Uuid = body["id"].as_str().unwrap().parse().unwrap();
    let step_id: Uuid = sqlx::query_scalar("SELECT id FROM steps WHERE run_id = $1 ORDER BY position LIMIT 1")
        .bind(run_id)
        .fetch_one(pool)
        .await
        .unwrap();
    (run_id, step_id)
}

/// An artifact row as an executor's report records it; its id.
async fn record(pool: &PgPool, step_id: Uuid, name: &str, uri: &str, digest: &str) -> i64 {
    sqlx::query_scalar(
        "INSERT INTO artifacts (step_id, attempt, fence, name, uri, size_bytes, digest) VALUES ($1, 1, 1, $2, $3, 5, $4) RETURNING id",
    )
    .bind(step_id)
    .bind(name)
    .bind(uri)
    .bind(digest)
    .fetch_one(pool)
    .await
    .unwrap()
}

async fn get(router: &axum::Router, uri: &str, token: Option<&str>) -> axum::response::Response {
    let mut request = Request::builder().method(Method::GET).uri(uri);
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    router.clone().oneshot(request.body(Body::empty()).unwrap()).await.unwrap()
}

async fn put(store: &Arc<dyn ArtifactStore>, run: Uuid, step: Uuid, name: &str) -> rara_artifacts::Stored {
    let key = Key::artifact(run, step, 1, name).unwrap();
    store.put(&key, reader_of(b"hello".to_vec()), Some("text/html")).await.unwrap()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn from_s3_an_authenticated_caller_is_redirected_to_a_presigned_url_that_downloads(pool: PgPool) {
    let (store, _) = rara_testkit::s3_store("art").await;
    let router = api(pool.clone()).with_artifacts(store.clone(), rara_artifacts::DEFAULT_INLINE_BYTES).router();
    let client = Client { router: router.clone() };
    let (run, step) = one_step_run(&client, &pool).await;
    let stored = put(&store, run, step, "report.html").await;
    let id = record(&pool, step, "report.html", &stored.uri, &stored.digest).await;

    // The run shows the artifact's id.
    let (_, view) = client.get(&format!("/api/runs/{run}")).await;
    assert_eq!(view["steps"][0]["artifacts"][0]["id"], json!(id), "{view}");

    let anonymous = get(&router, &format!("/api/artifacts/{id}"), None).await;
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    assert!(anonymous.headers().get(header::LOCATION).is_none());

    let response = get(&router, &format!("/api/artifacts/{id}"), Some(TOKEN)).await;
    assert_eq!(response.status(), StatusCode::TEMPORARY_REDIRECT);
    let url = response.headers()[header::LOCATION].to_str().unwrap().to_owned();
    assert!(url.contains("X-Amz-Expires=300"), "{url}");
    // Followed without any credential, as a browser would.
    let body = reqwest::get(&url).await.unwrap();
    assert!(body.status().is_success(), "{}", body.status());
    assert_eq!(body.bytes().await.unwrap().as_ref(), b"hello");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn from_a_directory_the_bytes_are_an_attachment_and_foreign_uris_are_never_served(pool: PgPool) {
    let dir = std::env::temp_dir().join(format!("rara-api-artifacts-{}", Uuid::new_v4().simple()));
    let store = rara_artifacts::open(&format!("file://{}", dir.display()), || unreachable!()).unwrap();
    let router = api(pool.clone()).with_artifacts(store.clone(), rara_artifacts::DEFAULT_INLINE_BYTES).router();
    let client = Client { router: router.clone() };
    let (run, step) = one_step_run(&client, &pool).await;
    let stored = put(&store, run, step, "page.html").await;
    let id = record(&pool, step, "page.html", &stored.uri, &stored.digest).await;

    let response = get(&router, &format!("/api/artifacts/{id}"), Some(TOKEN)).await;
    assert_eq!(response.status(), StatusCode::OK);
    let headers = response.headers().clone();
    assert_eq!(headers[header::CONTENT_TYPE], "application/octet-stream", "never the executor's text/html");
    assert_eq!(headers[header::CONTENT_DISPOSITION], "attachment; filename=\"page.html\"");
    assert_eq!(response.into_body().collect().await.unwrap().to_bytes().as_ref(), b"hello");

    // A URI outside the store, or another run's object, is a name, not data.
    let (other_run, _) = one_step_run(&client, &pool).await;
    let other = put(&store, other_run, Uuid::new_v4(), "x.txt").await;
    for uri in ["file:///etc/passwd".to_owned(), format!("file://{}/../secret", dir.display()), other.uri] {
        let foreign = record(&pool, step, "foreign", &uri, "sha256:00").await;
        let response = get(&router, &format!("/api/artifacts/{foreign}"), Some(TOKEN)).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{uri}");
    }
    assert_eq!(get(&router, "/api/artifacts/999999", Some(TOKEN)).await.status(), StatusCode::NOT_FOUND);
    assert_eq!(get(&router, "/api/artifacts/x", Some(TOKEN)).await.status(), StatusCode::BAD_REQUEST);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn an_offloaded_output_downloads_and_the_step_panel_links_it_and_the_artifacts(pool: PgPool) {
    let dir = std::env::temp_dir().join(format!("rara-api-output-{}", Uuid::new_v4().simple()));
    let store = rara_artifacts::open(&format!("file://{}", dir.display()), || unreachable!()).unwrap();
    let router = api(pool.clone()).with_artifacts(store.clone(), rara_artifacts::DEFAULT_INLINE_BYTES).router();
    let client = Client { router: router.clone() };
    let (run, step) = one_step_run(&client, &pool).await;
    let output = store.put(&Key::output(run, step, 1), reader_of(br#"{"big":true}"#.to_vec()), None).await.unwrap();
    let reference = rara_domain::stored::Descriptor {
        uri: output.uri.clone(),
        size_bytes: output.size_bytes,
        digest: output.digest.clone(),
        media_type: Some("application/json".into()),
    }
    .reference();
    sqlx::query("UPDATE steps SET output = $1 WHERE id = $2").bind(&reference).bind(step).execute(&pool).await.unwrap();
    let stored = put(&store, run, step, "page.html").await;
    let artifact = record(&pool, step, "page.html", &stored.uri, &stored.digest).await;

    let path = format!("/api/steps/{step}/output");
    assert_eq!(get(&router, &path, None).await.status(), StatusCode::UNAUTHORIZED);
    let response = get(&router, &path, Some(TOKEN)).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.into_body().collect().await.unwrap().to_bytes().as_ref(), br#"{"big":true}"#);

    // The step's panel shows the reference and links both downloads, for a session only.
    let name: String =
        sqlx::query_scalar("SELECT name FROM steps WHERE id = $1").bind(step).fetch_one(&pool).await.unwrap();
    let session = client.session().await;
    let (status, _, page) = page(&client, Method::GET, &format!("/runs/{run}?step={name}"), Some(&session), None).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains(r#"id="step-panel""#) && page.contains(&output.uri), "{page}");
    assert!(
        page.contains(&format!(r#"href="{path}""#)) && page.contains(&format!(r#"href="/api/artifacts/{artifact}""#))
    );
    let anonymous = get(&router, &format!("/runs/{run}?step={name}"), None).await;
    let anonymous = String::from_utf8(anonymous.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();
    assert!(anonymous.contains(&output.uri) && !anonymous.contains(&format!(r#"href="{path}""#)), "{anonymous}");
    let long = "x".repeat(600);
    assert_eq!(get(&router, &format!("/runs/{run}?step={long}"), None).await.status(), StatusCode::BAD_REQUEST);

    // Another run's object, or an output held inline, is not served.
    let (other_run, other_step) = one_step_run(&client, &pool).await;
    sqlx::query("UPDATE steps SET output = $1 WHERE id = $2")
        .bind(&reference)
        .bind(other_step)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(
        get(&router, &format!("/api/steps/{other_step}/output"), Some(TOKEN)).await.status(),
        StatusCode::NOT_FOUND
    );
    sqlx::query("UPDATE steps SET output = '{\"small\": 1}' WHERE id = $1")
        .bind(other_step)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(
        get(&router, &format!("/api/steps/{other_step}/output"), Some(TOKEN)).await.status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        get(&router, &format!("/api/steps/{}/output", Uuid::new_v4()), Some(TOKEN)).await.status(),
        StatusCode::NOT_FOUND
    );
    assert_ne!(other_run, run);
}
