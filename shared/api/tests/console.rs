//! The console's pages, session, CSRF protection and live stream, against a real Postgres (the
//! browser test of `cli/tests/console.rs` drives the same pages in Chromium).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use axum::http::{Method, StatusCode, header};
use common::{Client, TOKEN, csrf_of, page};
use serde_json::json;
use sqlx::PgPool;

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_run_page_draws_every_step_and_reads_without_a_session(pool: PgPool) {
    let client = Client::new(pool);
    let run = client.submit_demo().await;
    let (status, _, html) = page(&client, Method::GET, &format!("/runs/{run}"), None, None).await;
    assert_eq!(status, StatusCode::OK);
    for step in ["prepare", "work", "finish"] {
        assert!(
            html.contains(&format!(r#"class="step" data-step="{step}" data-status="pending""#)),
            "{step} in the DAG"
        );
    }
    assert_eq!(html.matches("<path d=").count(), 2, "two edges");
    assert!(html.contains("Read-only") && !html.contains(r#"name="csrf""#), "no form without a session");
    let (status, _, list) = page(&client, Method::GET, "/", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(list.contains(&run));
    let (status, _, _) = page(&client, Method::GET, &format!("/runs/{}", uuid::Uuid::now_v7()), None, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_form_acts_only_with_the_session_and_its_csrf_token(pool: PgPool) {
    let client = Client::new(pool);
    let run = client.submit_demo().await;
    let (status, _, _) = page(&client, Method::GET, "/login?code=wrong", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let session = client.session().await;
    let cookie = Some(session.as_str());
    let forged = Some(format!("rara_session={TOKEN}"));
    let (_, _, html) = page(&client, Method::GET, &format!("/runs/{run}"), forged.as_deref(), None).await;
    assert!(!html.contains(r#"name="csrf""#), "the token is no session");

    let (_, _, html) = page(&client, Method::GET, &format!("/runs/{run}"), cookie, None).await;
    let csrf = csrf_of(&html);
    assert_ne!(csrf, TOKEN);
    let cancel = format!("/runs/{run}/cancel");
    let (status, _, _) = page(&client, Method::POST, &cancel, None, Some(format!("csrf={csrf}"))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "no session");
    let (status, _, error) = page(&client, Method::POST, &cancel, cookie, Some("csrf=forged".into())).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{error}");
    let (_, read) = client.get(&format!("/api/runs/{run}")).await;
    assert_eq!(read["status"], "running", "a refused form changes nothing");

    let (status, headers, _) =
        page(&client, Method::POST, &cancel, cookie, Some(format!("csrf={csrf}&reason=done"))).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(headers[header::LOCATION], format!("/runs/{run}").as_str());
    let (_, read) = client.get(&format!("/api/runs/{run}")).await;
    assert_eq!(read["status"], "cancelled");
    assert_eq!(read["steps"][0]["error"]["message"], "done");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_bulk_form_confirms_with_the_count_before_it_acts(pool: PgPool) {
    let client = Client::new(pool);
    let runs = [client.submit_demo().await, client.submit_demo().await];
    let session = client.session().await;
    let cookie = Some(session.as_str());
    let (_, _, html) = page(&client, Method::GET, "/", cookie, None).await;
    let csrf = csrf_of(&html);
    let form = format!("csrf={csrf}&action=cancel&status=running&name=demo-api");
    let (status, _, confirm) = page(&client, Method::POST, "/bulk", cookie, Some(form.clone())).await;
    assert_eq!(status, StatusCode::OK);
    assert!(confirm.contains("2 running runs to cancel"), "{confirm}");
    for run in &runs {
        assert_eq!(client.get(&format!("/api/runs/{run}")).await.1["status"], "running");
    }
    let (status, _, _) = page(&client, Method::POST, "/bulk", cookie, Some(format!("{form}&confirmed=yes"))).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    for run in &runs {
        assert_eq!(client.get(&format!("/api/runs/{run}")).await.1["status"], "cancelled");
    }
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_run_page_stream_sends_the_page_again_when_the_run_changes(pool: PgPool) {
    let client = Client::new(pool.clone());
    let run = client.submit_demo().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = common::api(pool).router();
    tokio::spawn(async move { axum::serve(listener, router).await });

    let http = reqwest::Client::new();
    let session = client.session().await;
    let mut stream =
        http.get(format!("http://{addr}/runs/{run}/events")).header("cookie", session).send().await.unwrap();
    assert_eq!(stream.status(), 200);
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    // The stream subscribed before the answer's headers came back: the change is heard.
    let cancelled = client.post(&format!("/api/runs/{run}/cancel"), json!(null)).await;
    assert_eq!(cancelled.0, StatusCode::OK);
    let mut seen = String::new();
    let heard = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(chunk) = stream.chunk().await.unwrap() {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("event: update") && seen.contains(r#"data-status="cancelled""#) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(heard, Ok(true), "no update with the cancelled run: {seen}");
}

/// What a console request could change: every trigger's `tgenabled` on the hot tables, and the
/// registrations.
async fn console_state(pool: &PgPool) -> (String, i64) {
    let triggers: String = sqlx::query_scalar(
        "SELECT string_agg(c.relname || '.' || t.tgname || '=' || t.tgenabled::text, ',' ORDER BY c.relname, t.tgname)
         FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
         WHERE NOT t.tgisinternal AND c.relname IN ('steps', 'workflow_runs')",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    let listeners: i64 = sqlx::query_scalar("SELECT count(*) FROM console_listeners").fetch_one(pool).await.unwrap();
    (triggers, listeners)
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn an_anonymous_page_view_changes_nothing_in_pg_trigger_or_console_listeners(pool: PgPool) {
    let client = Client::new(pool.clone());
    let run = client.submit_demo().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let router = common::api(pool.clone()).router();
    tokio::spawn(async move { axum::serve(listener, router).await });
    let http = reqwest::Client::new();
    let before = console_state(&pool).await;
    assert_eq!(before.1, 0);

    for path in ["/".to_owned(), format!("/runs/{run}")] {
        let page = http.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(page.status(), 200, "{path}");
        let html = page.text().await.unwrap();
        assert!(html.contains(&run), "{path} shows the run");
        assert!(!html.contains("EventSource") && html.contains(r#"id="static-page""#), "{path}: the static page");
    }
    for path in ["/fragments/runs".to_owned(), format!("/runs/{run}/fragment")] {
        assert_eq!(http.get(format!("{base}{path}")).send().await.unwrap().status(), 200, "{path}");
    }
    for path in ["/events".to_owned(), format!("/runs/{run}/events")] {
        let refused = http.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(refused.status(), 401, "{path}: no stream for an anonymous reader");
    }
    assert_eq!(console_state(&pool).await, before, "no trigger toggled, no listener registered");

    // The same stream with a session does change both: the comparison above can fail.
    let session = client.session().await;
    let page = http.get(format!("{base}/runs/{run}")).header("cookie", &session).send().await.unwrap();
    assert!(page.text().await.unwrap().contains("EventSource"), "a session's page is live");
    let stream = http.get(format!("{base}/events")).header("cookie", &session).send().await.unwrap();
    assert_eq!(stream.status(), 200);
    let after = console_state(&pool).await;
    assert_eq!(after.1, 1, "a session's stream registers");
    assert_ne!(after.0, before.0, "and turns the console's triggers on");
}

/// The inbox (`/waits`): every waiting step across runs; to an anonymous reader without forms
/// or tokens, to a session with each wait's form, which refuses a payload the schema fails
/// (naming the field), then delivers and says what changed; a form without the CSRF token is
/// refused.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_inbox_lists_waits_and_its_forms_complete_them(pool: PgPool) {
    let client = Client::new(pool.clone());
    let yaml = "name: gates\nsteps:\n  - name: approve\n    wait: {signal: approve, schema: {type: object, \
                required: [approved_by]}}\n  - {name: dataset, wait: {event: dataset.uploaded, key: k1}}\n";
    let (status, body) = client.post("/api/runs", json!({"definition": yaml})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let run = body["id"].as_str().unwrap().to_owned();
    rara_store::Store::new(pool.clone()).wait_round(100).await.unwrap();
    let token: String = sqlx::query_scalar("SELECT token FROM waits LIMIT 1").fetch_one(&pool).await.unwrap();

    let (status, _, html) = page(&client, Method::GET, "/waits", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains(r#"data-step="approve""#) && html.contains(r#"data-step="dataset""#), "{html}");
    assert!(html.contains("event dataset.uploaded (key k1), no timeout"));
    assert!(!html.contains(r#"name="csrf""#) && !html.contains(&token), "no form and no token anonymously");

    let session = client.session().await;
    let cookie = Some(session.as_str());
    let (_, _, html) = page(&client, Method::GET, "/waits", cookie, None).await;
    let csrf = csrf_of(&html);
    assert!(html.contains(r#"action="/waits/signal""#) && html.contains(r#"action="/waits/event""#));
    assert!(html.contains("[&quot;approved_by&quot;]"), "the required fields are shown");
    assert!(!html.contains(&token), "the completion token is no part of the page");

    let signal =
        |data: &str, csrf: &str| format!("csrf={csrf}&run={run}&name=approve&id=f1&decision=approve&data={data}");
    let (status, _, _) = page(&client, Method::POST, "/waits/signal", cookie, Some(signal("%7B%7D", "forged"))).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, html) = page(&client, Method::POST, "/waits/signal", cookie, Some(signal("%7B%7D", &csrf))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{html}");
    assert!(html.contains(r#"id="refused""#) && html.contains("data: &quot;approved_by&quot; is a required"), "{html}");
    let (status, _, html) = page(&client, Method::POST, "/waits/signal", cookie, Some(signal("not json", &csrf))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{html}");
    assert!(html.contains("data is not JSON"));
    let data = "%7B%22approved_by%22%3A%22ana%22%7D";
    let (status, _, html) = page(&client, Method::POST, "/waits/signal", cookie, Some(signal(data, &csrf))).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains("Signal approve delivered (approved): approve."), "{html}");
    // The same form again (its idempotency id): one delivery.
    let (_, _, html) = page(&client, Method::POST, "/waits/signal", cookie, Some(signal(data, &csrf))).await;
    assert!(html.contains("Signal approve duplicate"), "{html}");

    let event = format!("csrf={csrf}&name=dataset.uploaded&key=k1&id=e1&payload=");
    let (status, _, html) = page(&client, Method::POST, "/waits/event", cookie, Some(event)).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains("Event dataset.uploaded (key k1) sent; it completed 1 wait(s)."), "{html}");
    assert!(html.contains("nothing waits"), "{html}");
    let (_, read) = client.get(&format!("/api/runs/{run}")).await;
    assert_eq!(read["status"], "succeeded", "{read}");
}

/// A finished run's page offers "Rerun from here" on each step; the form makes the rerun and
/// opens it, and the pages link both runs.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn rerun_from_here_opens_the_new_run(pool: PgPool) {
    let client = Client::new(pool.clone());
    let yaml =
        "name: gates\nsteps:\n  - {name: a, wait: {signal: go}}\n  - {name: b, depends_on: [a], wait: {signal: ok}}\n";
    let (_, body) = client.post("/api/runs", json!({"definition": yaml})).await;
    let run = body["id"].as_str().unwrap().to_owned();
    for (signal, body) in [("go", json!({})), ("ok", json!({"reject": "no"}))] {
        rara_store::Store::new(pool.clone()).wait_round(100).await.unwrap();
        let (status, answer) = client.post(&format!("/api/runs/{run}/signals/{signal}"), body).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
    }
    let session = client.session().await;
    let cookie = Some(session.as_str());
    let (_, _, html) = page(&client, Method::GET, &format!("/runs/{run}"), cookie, None).await;
    assert!(html.contains(&format!(r#"action="/runs/{run}/rerun""#)) && html.contains("Rerun from here"), "{html}");
    let form = Some(format!("csrf={}&from=b", csrf_of(&html)));
    let (status, headers, _) = page(&client, Method::POST, &format!("/runs/{run}/rerun"), cookie, form).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let location = headers[header::LOCATION].to_str().unwrap().to_owned();
    let (_, _, html) = page(&client, Method::GET, &location, cookie, None).await;
    assert!(html.contains(&format!(r#"href="/runs/{run}""#)) && html.contains("Rerun of"), "{html}");
    assert!(html.contains("(carried over)"), "{html}");
    let (_, _, html) = page(&client, Method::GET, &format!("/runs/{run}"), cookie, None).await;
    assert!(html.contains(&format!(r#"href="{location}""#)), "the original links its rerun");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_run_page_shows_inputs_kept_by_reference_by_size_and_digest(pool: PgPool) {
    let client = Client::new(pool.clone());
    let run = client.submit_demo().await;
    let (_, _, html) = page(&client, Method::GET, &format!("/runs/{run}"), None, None).await;
    assert!(!html.contains("inputs-stored"), "inline inputs: no reference");
    // As `rara_operator::inputs` stores a run's large inputs.
    let reference = json!({"$stored": {"uri": "s3://b/runs/x/inputs.json", "size_bytes": 5_447_781,
                                       "digest": "sha256:abc123", "media_type": "application/json"}});
    sqlx::query("UPDATE workflow_runs SET inputs = $2 WHERE id = $1::uuid")
        .bind(&run)
        .bind(&reference)
        .execute(&pool)
        .await
        .unwrap();
    let (_, _, html) = page(&client, Method::GET, &format!("/runs/{run}"), None, None).await;
    assert!(html.contains(r#"id="inputs-stored""#), "{html}");
    assert!(html.contains("5447781 bytes") && html.contains("sha256:abc123"), "{html}");
}
