//! Every endpoint of the JSON API against a real Postgres: what it answers, and that bad input
//! gets a structured 4xx and changes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use axum::http::{Method, StatusCode};
use common::{Client, TOKEN, demo_definition, runs_count};
use serde_json::{Value, json};
use sqlx::PgPool;

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_submitted_run_is_listed_and_read_with_its_steps(pool: PgPool) {
    let client = Client::new(pool);
    let (status, body) = client.post("/api/runs", json!({"definition": demo_definition()})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = body["id"].as_str().unwrap().to_owned();
    assert_eq!(body["created"], true);

    let (status, page) = client.get("/api/runs").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page["runs"][0]["id"], id.as_str());
    assert_eq!(page["runs"][0]["steps_total"], 3);
    assert!(page["next_cursor"].is_null());

    let (status, run) = client.get(&format!("/api/runs/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(run["status"], "running");
    let names: Vec<&str> = run["steps"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["prepare", "work", "finish"]);
    assert_eq!(run["steps"][1]["depends_on"], json!(["prepare"]));
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_definition_as_yaml_text_with_inputs_and_a_key_is_submitted_once(pool: PgPool) {
    let client = Client::new(pool.clone());
    let yaml = "name: greet\ninputs: {who: {type: string}}\nsteps:\n  - name: hello\n    operation: noop\n    input: {who: {$input: /who}}\n";
    let request = json!({"definition": yaml, "inputs": {"who": "ops"}, "idempotency_key": "greet-1"});
    let (status, first) = client.post("/api/runs", request.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let (status, again) = client.post("/api/runs", request).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again, json!({"id": first["id"], "created": false}));
    assert_eq!(runs_count(&pool).await, 1);
    let (_, run) = client.get(&format!("/api/runs/{}", first["id"].as_str().unwrap())).await;
    assert_eq!(run["inputs"], json!({"who": "ops"}));
    assert_eq!(run["idempotency_key"], "greet-1");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn bad_submissions_get_a_structured_4xx_and_store_nothing(pool: PgPool) {
    let client = Client::new(pool.clone());
    // What is sent (a name, the body, its content type), what comes back (status, code, field).
    type Case = (&'static str, Vec<u8>, &'static str, StatusCode, &'static str, Option<&'static str>);
    let cases: Vec<Case> = vec![
        (
            "malformed JSON",
            b"{\"definition\": ".to_vec(),
            "application/json",
            StatusCode::BAD_REQUEST,
            "bad_request",
            None,
        ),
        (
            "unknown field",
            serde_json::to_vec(&json!({"definition": demo_definition(), "colour": "red"})).unwrap(),
            "application/json",
            StatusCode::BAD_REQUEST,
            "bad_request",
            Some("colour"),
        ),
        (
            "missing definition",
            b"{}".to_vec(),
            "application/json",
            StatusCode::BAD_REQUEST,
            "bad_request",
            Some("definition"),
        ),
        (
            "oversized body",
            serde_json::to_vec(&json!({"definition": demo_definition(), "inputs": {"big": "x".repeat(3 << 20)}}))
                .unwrap(),
            "application/json",
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            None,
        ),
        (
            "not JSON at all",
            serde_json::to_vec(&json!({"definition": demo_definition()})).unwrap(),
            "text/plain",
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            None,
        ),
        (
            "a cycle",
            serde_json::to_vec(&json!({"definition": {"name": "loop", "steps": [
                {"name": "a", "operation": "noop", "depends_on": ["b"]},
                {"name": "b", "operation": "noop", "depends_on": ["a"]}]}}))
            .unwrap(),
            "application/json",
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_workflow",
            None,
        ),
        (
            "a definition of the wrong shape",
            serde_json::to_vec(&json!({"definition": {"name": "x", "steps": "none"}})).unwrap(),
            "application/json",
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_workflow",
            Some("definition"),
        ),
        (
            "a secret no grant permits",
            serde_json::to_vec(&json!({"definition": {"name": "x", "steps": [
                {"name": "a", "operation": "noop", "input": {"token": {"$secret": "api"}}}]}}))
            .unwrap(),
            "application/json",
            StatusCode::FORBIDDEN,
            "SECRET_NOT_GRANTED",
            Some("definition.steps[0].input.token"),
        ),
    ];
    for (what, body, content_type, status, code, field) in cases {
        let (got, error) = client.send(Method::POST, "/api/runs", Some(TOKEN), Some((content_type, body))).await;
        let error: Value = serde_json::from_str(&error).unwrap_or_else(|_| panic!("{what}: not JSON: {error}"));
        assert_eq!(got, status, "{what}: {error}");
        assert_eq!(error["code"], code, "{what}: {error}");
        assert!(!error["message"].as_str().unwrap().is_empty(), "{what}");
        assert!(error["exit_code"].as_u64().unwrap() >= 1, "{what}");
        if let Some(field) = field {
            assert_eq!(error["field"], field, "{what}: {error}");
        }
    }
    assert_eq!(runs_count(&pool).await, 0);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn an_invalid_definition_answers_the_cli_exit_code_and_the_field(pool: PgPool) {
    let client = Client::new(pool);
    let (status, error) = client
        .post(
            "/api/runs",
            json!({"definition": {"name": "x", "steps": [{"name": "a", "operation": "noop", "max_attempts": 0}]}}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(error["exit_code"], 4);
    assert!(error["field"].as_str().unwrap().starts_with("definition.steps"), "{error}");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_state_changing_request_without_the_token_is_refused_and_changes_nothing(pool: PgPool) {
    let client = Client::new(pool.clone());
    let run = client.submit_demo().await;
    let body = serde_json::to_vec(&json!({"definition": demo_definition()})).unwrap();
    for token in [None, Some("wrong")] {
        for (method, uri, body) in [
            (Method::POST, "/api/runs".to_owned(), Some(("application/json", body.clone()))),
            (Method::POST, format!("/api/runs/{run}/cancel"), None),
            (Method::POST, "/api/bulk/cancel".to_owned(), Some(("application/json", b"{}".to_vec()))),
        ] {
            let (status, error) = client.send(method, &uri, token, body).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{uri}");
            assert_eq!(serde_json::from_str::<Value>(&error).unwrap()["code"], "unauthorized");
        }
    }
    assert_eq!(runs_count(&pool).await, 1);
    let (_, read) = client.get(&format!("/api/runs/{run}")).await;
    assert_eq!(read["status"], "running");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_run_is_cancelled_and_a_cancelled_step_retried(pool: PgPool) {
    let client = Client::new(pool);
    let run = client.submit_demo().await;
    let (_, read) = client.get(&format!("/api/runs/{run}")).await;
    let work = read["steps"][1]["id"].as_str().unwrap().to_owned();

    let (status, cancelled) = client.post(&format!("/api/steps/{work}/cancel"), json!({"reason": "not today"})).await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    assert_eq!(cancelled, json!({"id": work, "kind": "step", "cancelled_steps": 1}));
    let (_, read) = client.get(&format!("/api/runs/{run}")).await;
    assert_eq!(read["steps"][1]["status"], "cancelled");
    assert_eq!(read["steps"][1]["error"]["message"], "not today");
    assert_eq!(read["steps"][2]["status"], "skipped");

    let (status, retried) = client.post(&format!("/api/steps/{work}/retry"), json!(null)).await;
    assert_eq!(status, StatusCode::OK, "{retried}");
    assert_eq!(retried["revived_steps"], 2);
    let (status, again) = client.post(&format!("/api/steps/{work}/retry"), json!(null)).await;
    assert_eq!((status, again["code"].as_str()), (StatusCode::CONFLICT, Some("conflict")));

    let (status, cancelled) = client.post(&format!("/api/runs/{run}/cancel"), json!(null)).await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    assert_eq!(cancelled["kind"], "run");
    let (_, read) = client.get(&format!("/api/runs/{run}")).await;
    assert_eq!(read["status"], "cancelled");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn ids_that_name_nothing_or_the_other_kind_are_not_found_and_cancel_nothing(pool: PgPool) {
    let client = Client::new(pool);
    let run = client.submit_demo().await;
    let nobody = uuid::Uuid::now_v7();
    for uri in [format!("/api/runs/{nobody}")] {
        let (status, error) = client.get(&uri).await;
        assert_eq!((status, error["exit_code"].as_u64()), (StatusCode::NOT_FOUND, Some(3)));
    }
    // A run id where a step id belongs.
    let (status, error) = client.post(&format!("/api/steps/{run}/cancel"), json!(null)).await;
    assert_eq!((status, error["code"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")));
    let (status, error) = client.post(&format!("/api/steps/{nobody}/retry"), json!(null)).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{error}");
    let (status, error) = client.get("/api/runs/not-a-uuid").await;
    assert_eq!((status, error["field"].as_str()), (StatusCode::BAD_REQUEST, Some("id")));
    let (status, error) = client.post(&format!("/api/runs/{run}/cancel"), json!({"why": "x"})).await;
    assert_eq!((status, error["field"].as_str()), (StatusCode::BAD_REQUEST, Some("why")));
    let (_, read) = client.get(&format!("/api/runs/{run}")).await;
    assert_eq!(read["status"], "running");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn runs_are_paged_by_cursor_and_filtered(pool: PgPool) {
    let client = Client::new(pool);
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(client.submit_demo().await);
    }
    let (_, first) = client.get("/api/runs?limit=2").await;
    let page1: Vec<&str> = first["runs"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(page1, [ids[2].as_str(), ids[1].as_str()]);
    let cursor = first["next_cursor"].as_str().unwrap();
    let (_, second) = client.get(&format!("/api/runs?limit=2&cursor={cursor}")).await;
    let page2: Vec<&str> = second["runs"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(page2, [ids[0].as_str()]);
    assert!(second["next_cursor"].is_null());

    client.post(&format!("/api/runs/{}/cancel", ids[0]), json!(null)).await;
    let (_, cancelled) = client.get("/api/runs?status=cancelled").await;
    assert_eq!(cancelled["runs"].as_array().unwrap().len(), 1);
    let (_, named) = client.get("/api/runs?name=demo-api&created_after=2000-01-01T00:00:00Z").await;
    assert_eq!(named["runs"].as_array().unwrap().len(), 3);
    let (_, none) = client.get("/api/runs?name=other").await;
    assert_eq!(none["runs"], json!([]));

    for (uri, field) in [
        ("/api/runs?cursor=garbage", Some("cursor")),
        ("/api/runs?limit=0", Some("limit")),
        ("/api/runs?limit=9999", Some("limit")),
        ("/api/runs?status=sleeping", None),
        ("/api/runs?sort=name", None),
    ] {
        let (status, error) = client.get(uri).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}: {error}");
        assert_eq!(error["code"], "bad_request", "{uri}");
        if let Some(field) = field {
            assert_eq!(error["field"], field, "{uri}");
        }
    }
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_bulk_action_counts_first_and_acts_when_asked(pool: PgPool) {
    let client = Client::new(pool);
    let runs = [client.submit_demo().await, client.submit_demo().await];
    let (status, dry) = client.post("/api/bulk/cancel", json!({"name": "demo-api", "dry_run": true})).await;
    assert_eq!(status, StatusCode::OK, "{dry}");
    assert_eq!(dry, json!({"matched": 2, "changed": 0, "dry_run": true}));
    let (_, read) = client.get(&format!("/api/runs/{}", runs[0])).await;
    assert_eq!(read["status"], "running");

    let (_, done) = client.post("/api/bulk/cancel", json!({"name": "demo-api", "reason": "maintenance"})).await;
    assert_eq!(done, json!({"matched": 2, "changed": 6, "dry_run": false}));
    let (_, retry_dry) = client.post("/api/bulk/retry", json!({"status": "cancelled", "dry_run": true})).await;
    assert_eq!(retry_dry["matched"], 6);
    let (_, retried) = client.post("/api/bulk/retry", json!({"status": "cancelled"})).await;
    assert_eq!(retried["changed"], 6);
    let (status, error) = client.post("/api/bulk/retry", json!({"reason": "x"})).await;
    assert_eq!((status, error["field"].as_str()), (StatusCode::BAD_REQUEST, Some("reason")));
}

/// serde reads a struct from a JSON array too (`["demo"]` fills the first field): every body
/// is read as an object first, so an array, like any value that is not an object, is a 400 and
/// changes nothing.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn every_request_body_must_be_an_object(pool: PgPool) {
    let client = Client::new(pool.clone());
    let run = client.submit_demo().await;
    let before = runs_count(&pool).await;
    let definitions = "SELECT count(*) FROM workflow_definitions";
    let registered: i64 = sqlx::query_scalar(definitions).fetch_one(&pool).await.unwrap();
    let step: String =
        sqlx::query_scalar("SELECT id::text FROM steps WHERE name = 'prepare'").fetch_one(&pool).await.unwrap();
    let uris = [
        "/api/runs".to_owned(),
        format!("/api/runs/{run}/rerun"),
        format!("/api/runs/{run}/cancel"),
        format!("/api/steps/{step}/cancel"),
        format!("/api/runs/{run}/signals/approved"),
        "/api/bulk/cancel".to_owned(),
        "/api/bulk/retry".to_owned(),
        "/api/bulk/replay".to_owned(),
        "/api/events".to_owned(),
        "/api/workflows".to_owned(),
        "/api/workflows/validate".to_owned(),
        "/api/workflows/demo-api/runs".to_owned(),
        "/api/schedules".to_owned(),
        "/api/schedules/nightly/backfill".to_owned(),
    ];
    let definition = demo_definition();
    let bodies = [json!([definition]), json!([{"definition": definition}, null]), json!(["x"]), json!("x"), json!(7)];
    for uri in &uris {
        for body in &bodies {
            let (status, answer) = client.post(uri, body.clone()).await;
            assert_eq!(
                (status, answer["code"].clone()),
                (StatusCode::BAD_REQUEST, json!("bad_request")),
                "{uri} {body}: {answer}"
            );
        }
    }
    assert_eq!(runs_count(&pool).await, before, "nothing submitted");
    let cancelled: i64 =
        sqlx::query_scalar("SELECT count(*) FROM steps WHERE status = 'cancelled'").fetch_one(&pool).await.unwrap();
    assert_eq!(cancelled, 0, "nothing cancelled");
    let after: i64 = sqlx::query_scalar(definitions).fetch_one(&pool).await.unwrap();
    assert_eq!(after, registered, "nothing registered");
}
