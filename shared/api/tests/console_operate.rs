//! The operator pages over a real Postgres: `/schedules` (pause, resume, trigger) and `/limits`
//! (set and unset a limit, pause and resume a key and a run). Each form needs the session and
//! its CSRF token, answers with what it changed, and the database shows the change; a refused
//! form names its field and changes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use axum::http::{Method, StatusCode};
use common::{Client, csrf_of, page};
use serde_json::json;
use sqlx::PgPool;

/// The text of the `#done` (or `#refused`) panel of a page.
fn said(html: &str) -> String {
    let at = html.find(r#"id="done""#).or(html.find(r#"id="refused""#)).expect("a panel that says what happened");
    let inner = &html[at..];
    inner[inner.find('>').unwrap() + 1..inner.find("</div>").unwrap()].to_owned()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_schedules_page_pauses_resumes_and_triggers_a_schedule(pool: PgPool) {
    let client = Client::new(pool.clone());
    let nightly = "name: nightly\nsteps: [{name: index, operation: noop}]\n";
    assert_eq!(client.post("/api/workflows", json!({"definition": nightly})).await.0, StatusCode::CREATED);
    let schedule = json!({"name": "nightly-index", "workflow": "nightly", "every_seconds": 3600});
    assert_eq!(client.post("/api/schedules", schedule).await.0, StatusCode::CREATED);
    let paused = || async {
        sqlx::query_scalar::<_, bool>("SELECT paused FROM schedules WHERE name = 'nightly-index'")
            .fetch_one(&pool)
            .await
            .unwrap()
    };

    let (status, _, anonymous) = page(&client, Method::GET, "/schedules", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(anonymous.contains(r#"data-name="nightly-index""#) && !anonymous.contains(r#"name="csrf""#));
    let session = client.session().await;
    let cookie = Some(session.as_str());
    let (_, _, html) = page(&client, Method::GET, "/schedules", cookie, None).await;
    let csrf = csrf_of(&html);
    let form = |action: &str, csrf: &str| Some(format!("csrf={csrf}&name=nightly-index&action={action}"));

    let (status, _, _) = page(&client, Method::POST, "/schedules/action", cookie, form("pause", "forged")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(!paused().await, "a forged form changes nothing");
    let (status, _, html) = page(&client, Method::POST, "/schedules/action", cookie, form("pause", &csrf)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(said(&html).contains("was active, is now paused"), "{}", said(&html));
    assert!(paused().await);
    let (_, _, html) = page(&client, Method::POST, "/schedules/action", cookie, form("resume", &csrf)).await;
    assert!(said(&html).contains("was paused, is now active, next fire"), "{}", said(&html));
    assert!(!paused().await);

    let (_, _, html) = page(&client, Method::POST, "/schedules/action", cookie, form("trigger", &csrf)).await;
    let runs: Vec<uuid::Uuid> = sqlx::query_scalar("SELECT id FROM workflow_runs").fetch_all(&pool).await.unwrap();
    assert_eq!(runs.len(), 1, "one run now");
    assert!(said(&html).contains(&format!("1 new run {}", runs[0])), "{}", said(&html));
    assert!(html.contains(&format!(r#"href="/runs/{}""#, runs[0])));
}

/// Sends a `/limits` form with the session and its CSRF token: the status, what the page says,
/// and the page.
async fn act(client: &Client, cookie: Option<&str>, csrf: &str, fields: &str) -> (StatusCode, String, String) {
    let form = Some(format!("csrf={csrf}&{fields}"));
    let (status, _, html) = page(client, Method::POST, "/limits/action", cookie, form).await;
    (status, said(&html), html)
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_limits_page_sets_limits_and_pauses_keys_and_runs(pool: PgPool) {
    let client = Client::new(pool.clone());
    let run = client.submit_demo().await;
    let session = client.session().await;
    let cookie = Some(session.as_str());
    let (_, _, html) = page(&client, Method::GET, "/limits", cookie, None).await;
    let csrf = csrf_of(&html);
    let limit = || async {
        sqlx::query_as::<_, (Option<i32>, Option<i32>)>(
            "SELECT max_held, rate_count FROM flow_limits WHERE target = 'tenant-*'",
        )
        .fetch_optional(&pool)
        .await
        .unwrap()
    };

    let (status, text, _) = act(&client, cookie, &csrf, "action=set&target=tenant-*&limit=many").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(text.contains("whole number") && text.contains("limit"), "{text}");
    assert_eq!(limit().await, None, "a refused form changes nothing");
    let (status, text, html) = act(&client, cookie, &csrf, "action=set&target=tenant-*&limit=3&rate=50%2Fs").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(text, "tenant-*: was no limit, now limit 3, rate 50/s.");
    assert_eq!(limit().await, Some((Some(3), Some(50))));
    assert!(html.contains(r#"<tr class="key" data-name="tenant-*">"#), "the key is listed");
    let (_, text, _) = act(&client, cookie, &csrf, "action=unset&target=tenant-*").await;
    assert_eq!(text, "tenant-*: was limit 3, rate 50/s, now no limit.");
    assert_eq!(limit().await, None);

    let pauses = || async {
        sqlx::query_as::<_, (String, String)>("SELECT kind::text, target FROM flow_pauses ORDER BY kind, target")
            .fetch_all(&pool)
            .await
            .unwrap()
    };
    let (_, text, _) = act(&client, cookie, &csrf, "action=pause&kind=key&target=tenant-a").await;
    assert!(text.starts_with("Paused key tenant-a"), "{text}");
    let (_, text, html) = act(&client, cookie, &csrf, &format!("action=pause&kind=run&target={run}")).await;
    assert!(text.starts_with(&format!("Paused run {run}")) && html.contains(&format!(r#"href="/runs/{run}""#)));
    assert_eq!(pauses().await, vec![("key".into(), "tenant-a".into()), ("run".into(), run.clone())]);
    let (_, text, _) = act(&client, cookie, &csrf, "action=resume&kind=key&target=tenant-a").await;
    assert!(text.starts_with("Resumed key tenant-a"), "{text}");
    let (status, text, _) = act(&client, cookie, &csrf, "action=pause&kind=run&target=not-a-run").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert_eq!(pauses().await, vec![("run".into(), run.clone())]);
}
