//! Registered definitions over HTTP: a registration checked as submit checks it, the same
//! content being the same version and new content the next, the listings, and runs of the
//! newest or a given version that record the version they were made from.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use axum::http::StatusCode;
use common::Client;
use serde_json::json;
use sqlx::PgPool;

const V1: &str = "name: nightly\ninputs: {day: {type: string}}\nsteps: [{name: a, operation: noop}]\n";
const V2: &str =
    "name: nightly\ninputs: {day: {type: string}}\nsteps: [{name: a, operation: noop}, {name: b, operation: noop}]\n";

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_registered_workflow_runs_its_newest_or_a_given_version(pool: PgPool) {
    let client = Client::new(pool.clone());
    let (status, first) = client.post("/api/workflows", json!({"definition": V1})).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert_eq!(first, json!({"name": "nightly", "version": 1, "created": true}));
    let (status, same) = client.post("/api/workflows", json!({"definition": V1})).await;
    assert_eq!((status, same["version"].clone(), same["created"].clone()), (StatusCode::OK, json!(1), json!(false)));
    let (status, second) = client.post("/api/workflows", json!({"definition": V2})).await;
    assert_eq!((status, second["version"].clone()), (StatusCode::CREATED, json!(2)), "{second}");
    let invalid = "name: nightly\nsteps: [{name: a, operation: noop, depends_on: [zz]}]";
    let (status, refused) = client.post("/api/workflows", json!({"definition": invalid})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["field"], "definition.steps[0].depends_on[0]");

    let (_, list) = client.get("/api/workflows").await;
    assert_eq!(list["workflows"][0]["name"], "nightly");
    assert_eq!(list["workflows"][0]["versions"], 2);
    let (_, versions) = client.get("/api/workflows/nightly").await;
    assert_eq!(versions["versions"].as_array().unwrap().len(), 2);
    let (_, one) = client.get("/api/workflows/nightly/versions/1").await;
    assert_eq!(one["definition"]["steps"].as_array().unwrap().len(), 1);
    let (status, _) = client.get("/api/workflows/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (status, refused) = client.post("/api/workflows/nightly/runs", json!({})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "a required input: {refused}");
    let (status, newest) = client.post("/api/workflows/nightly/runs", json!({"inputs": {"day": "d1"}})).await;
    assert_eq!(status, StatusCode::CREATED, "{newest}");
    let (_, run) = client.get(&format!("/api/runs/{}", newest["id"].as_str().unwrap())).await;
    assert_eq!((run["workflow_version"].clone(), run["steps"].as_array().unwrap().len()), (json!(2), 2));
    let body = json!({"version": 1, "inputs": {"day": "d1"}});
    let (_, older) = client.post("/api/workflows/nightly/runs", body).await;
    let (_, run) = client.get(&format!("/api/runs/{}", older["id"].as_str().unwrap())).await;
    assert_eq!((run["workflow_version"].clone(), run["steps"].as_array().unwrap().len()), (json!(1), 1));
    let (status, _) = client.post("/api/workflows/nightly/runs", json!({"version": 9})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
