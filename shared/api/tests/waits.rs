//! Durable waits over HTTP: a signal with the token (refused without it, with a bad payload,
//! twice, or when nothing waits), an event completing only its key's waits, a completion token
//! used without the API token (once; a wrong one is 404), and the inbox that shows the token
//! only to an authenticated reader.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use axum::http::{Method, StatusCode};
use common::{Client, TOKEN};
use rara_store::Store;
use serde_json::{Value, json};
use sqlx::PgPool;

const APPROVAL: &str = "name: release
steps:
  - name: approve
    wait: {signal: approve, schema: {type: object, required: [approved_by]}}
  - {name: dataset, wait: {event: dataset.uploaded, key: A}}
";

async fn waiting(client: &Client, pool: &PgPool) -> String {
    let (status, body) = client.post("/api/runs", json!({"definition": APPROVAL})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    Store::new(pool.clone()).wait_round(100).await.unwrap();
    body["id"].as_str().unwrap().to_owned()
}

async fn step(client: &Client, run: &str, name: &str) -> Value {
    let (_, run) = client.get(&format!("/api/runs/{run}")).await;
    run["steps"].as_array().unwrap().iter().find(|s| s["name"] == name).unwrap().clone()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_signal_completes_its_wait_once_and_says_why_it_refuses(pool: PgPool) {
    let client = Client::new(pool.clone());
    let run = waiting(&client, &pool).await;
    let uri = format!("/api/runs/{run}/signals/approve");
    let body = serde_json::to_vec(&json!({"data": {"approved_by": "ana"}, "id": "s1"})).unwrap();
    let (status, _) = client.send(Method::POST, &uri, None, Some(("application/json", body))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let (status, refused) = client.post(&uri, json!({"data": {}})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["code"], "invalid_payload");
    assert!(refused["message"].as_str().unwrap().contains("approved_by"), "{refused}");
    assert_eq!(step(&client, &run, "approve").await["status"], "waiting");

    let (status, delivered) = client.post(&uri, json!({"data": {"approved_by": "ana"}, "id": "s1"})).await;
    assert_eq!(status, StatusCode::OK, "{delivered}");
    assert_eq!(delivered, json!({"delivery": "delivered", "id": "s1", "steps": ["approve"], "paused": false}));
    assert_eq!(step(&client, &run, "approve").await["output"], json!({"approved_by": "ana"}));
    let (_, again) = client.post(&uri, json!({"data": {"approved_by": "bob"}, "id": "s1"})).await;
    assert_eq!(again["delivery"], "duplicate");
    let (status, late) = client.post(&uri, json!({"data": {"approved_by": "bob"}, "id": "s2"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{late}");
    assert_eq!(late["code"], "not_waiting");
    assert_eq!(late["exit_code"], 9);
    let (status, bad) = client.post(&format!("/api/runs/{run}/signals/no%20pe"), Value::Null).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn an_event_and_a_completion_token_complete_their_waits(pool: PgPool) {
    let client = Client::new(pool.clone());
    let run = waiting(&client, &pool).await;
    let (status, receipt) =
        client.post("/api/events", json!({"name": "dataset.uploaded", "key": "B", "id": "e1"})).await;
    assert_eq!(status, StatusCode::OK, "{receipt}");
    assert_eq!(receipt["completed"], 0);
    let (_, receipt) =
        client.post("/api/events", json!({"name": "dataset.uploaded", "key": "A", "payload": {"uri": "s3://a"}})).await;
    assert_eq!(receipt["completed"], 1, "{receipt}");
    assert_eq!(step(&client, &run, "dataset").await["output"], json!({"uri": "s3://a"}));

    // The inbox: the token only for an authenticated reader.
    let (status, anonymous) = client.get(&format!("/api/waits?run={run}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(anonymous.as_array().unwrap().len(), 1, "{anonymous}");
    assert!(anonymous[0]["token"].is_null(), "{anonymous}");
    let (_, text) = client.send(Method::GET, &format!("/api/waits?run={run}"), Some(TOKEN), None).await;
    let inbox: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(inbox[0]["name"], "approve");
    let token = inbox[0]["token"].as_str().unwrap().to_owned();

    // Without the API token: the completion token is the credential, once.
    let send = |path: String, body: Value| {
        let client = &client;
        async move {
            let bytes = serde_json::to_vec(&body).unwrap();
            client.send(Method::POST, &path, None, Some(("application/json", bytes))).await
        }
    };
    let (status, _) = send("/api/waits/0123abcd".into(), json!({"approved_by": "x"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, text) = send(format!("/api/waits/{token}"), json!({"approved_by": "partner"})).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let (status, _) = send(format!("/api/waits/{token}"), json!({"approved_by": "partner"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(step(&client, &run, "approve").await["output"], json!({"approved_by": "partner"}));
    let (_, done) = client.get(&format!("/api/runs/{run}")).await;
    assert_eq!(done["status"], "succeeded");
}

/// `POST /api/runs/{id}/rerun` on a run finished by signals: refused without the token, for a
/// step the run does not have (409, exit code 11) and an input it does not have (400, the
/// field); made otherwise (201), the first step carried over, both runs linked.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_rerun_is_made_over_http_and_linked_both_ways(pool: PgPool) {
    let client = Client::new(pool.clone());
    let yaml = "name: gates\ninputs: {n: {type: integer}}\nsteps:\n  - {name: a, wait: {signal: go}}\n  \
                - {name: b, depends_on: [a], wait: {signal: approve}}\n";
    let (_, body) = client.post("/api/runs", json!({"definition": yaml, "inputs": {"n": 1}})).await;
    let run = body["id"].as_str().unwrap().to_owned();
    for (signal, body) in [("go", json!({})), ("approve", json!({"reject": "not yet"}))] {
        Store::new(pool.clone()).wait_round(100).await.unwrap();
        let (status, answer) = client.post(&format!("/api/runs/{run}/signals/{signal}"), body).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
    }
    let uri = format!("/api/runs/{run}/rerun");
    let body = |value: Value| Some(("application/json", serde_json::to_vec(&value).unwrap()));
    let (status, _) = client.send(Method::POST, &uri, None, body(json!({"from": "b"}))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, refused) = client.post(&uri, json!({"from": "zz"})).await;
    assert_eq!(
        (status, refused["code"].as_str(), refused["exit_code"].as_u64()),
        (StatusCode::CONFLICT, Some("rerun_refused"), Some(11))
    );
    let (status, refused) = client.post(&uri, json!({"from": "b", "inputs": {"m": 2}})).await;
    assert_eq!((status, refused["field"].as_str()), (StatusCode::BAD_REQUEST, Some("inputs.m")), "{refused}");

    let (status, made) = client.post(&uri, json!({"from": "b", "inputs": {"n": 2}})).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!((made["carried"].clone(), made["rerun"].clone()), (json!(["a"]), json!(["b"])));
    let rerun = made["id"].as_str().unwrap();
    let (_, view) = client.get(&format!("/api/runs/{rerun}")).await;
    assert_eq!((view["rerun_of"].as_str(), view["inputs"].clone()), (Some(run.as_str()), json!({"n": 2})));
    assert_eq!(view["steps"][0]["status"], "succeeded");
    assert!(view["steps"][0]["carried_from"].is_string(), "{view}");
    assert_eq!(view["steps"][0]["attempts"].as_array().unwrap().len(), 1, "the original's attempt");
    let (_, original) = client.get(&format!("/api/runs/{run}")).await;
    assert_eq!(original["reruns"], json!([rerun]));
}

/// `POST /api/bulk/replay` over 200 failed runs (each rejected by a signal): a dry run counts
/// them, the replay makes 200 new runs with the same inputs, the same call again makes none.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_bulk_replay_makes_one_run_per_failed_run_once(pool: PgPool) {
    let client = Client::new(pool.clone());
    let store = Store::new(pool.clone());
    let yaml = "name: nightly\ninputs: {n: {type: integer}}\nsteps:\n  - {name: gate, wait: {signal: go}}\n";
    let mut runs = Vec::new();
    for n in 0..200 {
        let (_, body) = client.post("/api/runs", json!({"definition": yaml, "inputs": {"n": n}})).await;
        runs.push(body["id"].as_str().unwrap().parse::<uuid::Uuid>().unwrap());
    }
    store.wait_round(1000).await.unwrap();
    let reject = rara_store::waits::Signal { id: "r".into(), payload: json!({}), reject: Some("no".into()) };
    for run in &runs {
        store.signal(*run, "go", &reject).await.unwrap();
    }
    let (_, other) =
        client.post("/api/runs", json!({"definition": yaml.replace("nightly", "other"), "inputs": {"n": 1}})).await;
    assert!(other["id"].is_string());

    let filter = json!({"status": "failed", "name": "nightly", "dry_run": true});
    let (status, counted) = client.post("/api/bulk/replay", filter).await;
    assert_eq!(status, StatusCode::OK, "{counted}");
    assert_eq!((counted["matched"].as_u64(), counted["made"].as_u64()), (Some(200), Some(0)), "{counted}");
    assert_eq!(common::runs_count(&pool).await, 201, "a dry run makes nothing");

    let (_, done) = client.post("/api/bulk/replay", json!({"status": "failed", "name": "nightly"})).await;
    assert_eq!((done["made"].as_u64(), done["already"].as_u64()), (Some(200), Some(0)), "{done}");
    assert_eq!(common::runs_count(&pool).await, 401);
    let made = &done["runs"][7];
    let (_, replay) = client.get(&format!("/api/runs/{}", made["id"].as_str().unwrap())).await;
    let (_, original) = client.get(&format!("/api/runs/{}", made["original"].as_str().unwrap())).await;
    assert_eq!(replay["inputs"], original["inputs"], "the same inputs");
    assert_eq!(replay["rerun_of"], made["original"]);
    assert_eq!(replay["steps"][0]["status"], "pending", "every step runs again: {replay}");

    let (_, again) =
        client.post("/api/bulk/replay", json!({"status": "failed", "name": "nightly", "from_failed": true})).await;
    assert_eq!((again["made"].as_u64(), again["already"].as_u64()), (Some(0), Some(200)), "{again}");
    assert_eq!(common::runs_count(&pool).await, 401, "replayed once per run");
}
