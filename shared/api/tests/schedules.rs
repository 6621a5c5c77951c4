//! Schedules over HTTP: create (a bad spec refused at its field, a name taken is a conflict),
//! list with next fire, pause and resume, trigger, a backfill twice (the second makes nothing),
//! a range above the limit refused with its count, delete.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use axum::http::{Method, StatusCode};
use common::{Client, TOKEN};
use serde_json::json;
use sqlx::PgPool;

const NIGHTLY: &str = "name: nightly\ninputs: {night: {type: string}}\nsteps: [{name: index, operation: noop}]\n";

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_schedule_is_created_paused_triggered_backfilled_and_deleted(pool: PgPool) {
    let client = Client::new(pool.clone());
    let (status, _) = client.post("/api/workflows", json!({"definition": NIGHTLY})).await;
    assert_eq!(status, StatusCode::CREATED);
    let create = |cron: &str| {
        json!({"name": "nightly-index", "workflow": "nightly", "cron": cron, "timezone": "Europe/Berlin",
               "inputs": {"night": {"$schedule": "/slot_time"}}, "overlap": "skip", "catchup_window_seconds": 21600})
    };
    let (status, refused) = client.post("/api/schedules", create("0 2 * *")).await;
    assert_eq!((status, refused["field"].clone()), (StatusCode::BAD_REQUEST, json!("cron")), "{refused}");
    let (status, created) = client.post("/api/schedules", create("0 * * * *")).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!((created["workflow"].clone(), created["paused"].clone()), (json!("nightly"), json!(false)));
    let (status, _) = client.post("/api/schedules", create("0 * * * *")).await;
    assert_eq!(status, StatusCode::CONFLICT);

    let (_, list) = client.get("/api/schedules").await;
    assert_eq!(list["schedules"][0]["next_fire_at"], created["next_fire_at"]);
    let (_, paused) = client.post("/api/schedules/nightly-index/pause", serde_json::Value::Null).await;
    assert_eq!(paused["paused"], true);
    let (_, resumed) = client.post("/api/schedules/nightly-index/resume", serde_json::Value::Null).await;
    assert_eq!(resumed["paused"], false);
    let (status, triggered) = client.post("/api/schedules/nightly-index/trigger", serde_json::Value::Null).await;
    assert_eq!((status, triggered["created"].clone()), (StatusCode::OK, json!(1)), "{triggered}");

    let range = json!({"from": "2026-12-01T00:00:00Z", "to": "2026-12-03T00:00:00Z"});
    let (_, first) = client.post("/api/schedules/nightly-index/backfill", range.clone()).await;
    assert_eq!((first["slots"].clone(), first["created"].clone()), (json!(48), json!(48)), "{first}");
    let (_, again) = client.post("/api/schedules/nightly-index/backfill", range).await;
    assert_eq!((again["slots"].clone(), again["created"].clone()), (json!(48), json!(0)));
    let huge = json!({"from": "2026-01-01T00:00:00Z", "to": "2026-12-01T00:00:00Z"});
    let (status, refused) = client.post("/api/schedules/nightly-index/backfill", huge).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(refused["message"].as_str().unwrap().contains("8016 slots"), "{refused}");

    let (status, _) = client.send(Method::DELETE, "/api/schedules/nightly-index", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "deleting needs the token");
    let (status, _) = client.send(Method::DELETE, "/api/schedules/nightly-index", Some(TOKEN), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = client.get("/api/schedules/nightly-index").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
