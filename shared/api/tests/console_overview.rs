//! The landing page's overview over a real Postgres: the state now, the charts' buckets, the
//! operations and the error codes with links to the runs they failed in, from attempts the test
//! writes; a filtered runs list has no overview; `/fragments/overview` renders it alone.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use axum::http::{Method, StatusCode};
use common::Client;
use sqlx::PgPool;

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_landing_page_shows_what_failed_in_the_last_hour_and_where(pool: PgPool) {
    let client = Client::new(pool.clone());
    let runs = [client.submit_demo().await, client.submit_demo().await];
    // Every step of both runs ran once 10 minutes ago for 40 ms; `work` of the second run
    // failed with E_BROKEN, and that run failed 9 minutes ago.
    sqlx::query(
        "INSERT INTO step_attempts (step_id, attempt, fence, leased_by, lease_token, outcome, error, started_at, finished_at)
         SELECT s.id, 1, -row_number() OVER (), 'test', gen_random_uuid(),
                CASE WHEN s.run_id = $1 AND s.name = 'work' THEN 'failed' ELSE 'succeeded' END::rara_attempt_outcome,
                CASE WHEN s.run_id = $1 AND s.name = 'work'
                     THEN '{\"code\":\"E_BROKEN\",\"message\":\"broken\",\"retryable\":false}'::jsonb END,
                now() - interval '10 minutes', now() - interval '10 minutes' + interval '40 ms'
         FROM steps s",
    )
    .bind(runs[1].parse::<uuid::Uuid>().unwrap())
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(
        "UPDATE workflow_runs SET status = 'failed', steps_unfinished = 0, finished_at = now() - interval '9 minutes'
         WHERE id = $1",
    )
    .bind(runs[1].parse::<uuid::Uuid>().unwrap())
    .execute(&pool)
    .await
    .unwrap();

    let (status, html) = client.send(Method::GET, "/", None, None).await;
    assert_eq!(status, StatusCode::OK);
    let text = |id: &str| {
        let at = html.find(&format!(r#"id="{id}""#)).unwrap_or_else(|| panic!("no #{id}"));
        let inner = &html[at..];
        strip(&inner[inner.find('>').unwrap() + 1..inner.find("</a>").or(inner.find("</span>")).unwrap()])
    };
    assert_eq!(text("running"), "1 running");
    assert_eq!(text("failed"), "1 failed in the last hour");
    assert!(html.contains(r#"data-succeeded="5" data-retried="0" data-failed="1""#), "one bucket of six attempts");
    assert!(html.contains(r#"<tr data-operation="noop"><td><code>noop</code></td><td>4</td><td>0.0 %</td>"#));
    assert!(html.contains(r#"<tr data-operation="sleep"><td><code>sleep</code></td><td>2</td><td>50.0 %</td>"#));
    let errors = &html[html.find(r#"<tr data-code="E_BROKEN">"#).expect("the error's row")..];
    let errors = &errors[..errors.find("</tr>").unwrap()];
    assert!(errors.contains(&format!(r#"href="/runs/{}""#, runs[1])), "{errors}");
    assert!(!errors.contains(&runs[0]), "only the run it failed in: {errors}");
    assert!(html.contains(&runs[0]), "the runs list is below");

    let (_, day) = client.send(Method::GET, "/?window=day", None, None).await;
    assert!(day.contains("Attempts, last day, per 15 minutes") && day.contains(r#"<tr data-code="E_BROKEN">"#));
    assert!(day.contains(r#"data-succeeded="5" data-retried="0" data-failed="1""#), "the day's bucket");
    let (_, filtered) = client.send(Method::GET, "/?status=failed", None, None).await;
    assert!(!filtered.contains(r#"id="overview""#) && filtered.contains(&runs[1]));
    let (status, fragment) = client.send(Method::GET, "/fragments/overview", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(fragment.starts_with(r#"<section id="overview">"#) && fragment.contains("E_BROKEN"));
}

/// The text of some markup, tags removed.
fn strip(markup: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in markup.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_search_by_time_range_is_a_link_and_its_bulk_action_acts_on_it(pool: PgPool) {
    let client = Client::new(pool.clone());
    let (old, new) = (client.submit_demo().await, client.submit_demo().await);
    sqlx::query("UPDATE workflow_runs SET created_at = now() - interval '2 days' WHERE id = $1")
        .bind(old.parse::<uuid::Uuid>().unwrap())
        .execute(&pool)
        .await
        .unwrap();
    let from = (chrono::Utc::now() - chrono::Duration::days(1)).format("%Y-%m-%dT%H:%M").to_string();
    let session = client.session().await;
    let cookie = Some(session.as_str());
    let search = format!("/?name=demo-api&from={from}");
    let (status, _, html) = common::page(&client, Method::GET, &search, cookie, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains(&new) && !html.contains(&old), "only the run created since {from}");
    assert!(!html.contains(r#"id="overview""#), "a search is not the landing page");
    assert!(html.contains(&format!(r#"name="from" value="{from}""#)), "the form keeps the filter");

    let csrf = common::csrf_of(&html);
    let form = format!("csrf={csrf}&action=cancel&status=&name=demo-api&from={from}&to=");
    let (_, _, confirm) = common::page(&client, Method::POST, "/bulk", cookie, Some(form.clone())).await;
    assert!(confirm.contains("1 running runs to cancel"), "{confirm}");
    common::page(&client, Method::POST, "/bulk", cookie, Some(format!("{form}&confirmed=yes"))).await;
    assert_eq!(client.get(&format!("/api/runs/{new}")).await.1["status"], "cancelled");
    assert_eq!(client.get(&format!("/api/runs/{old}")).await.1["status"], "running", "outside the search");

    let (status, _, refused) = common::page(&client, Method::GET, "/?from=yesterday", None, None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(refused.contains("from"), "{refused}");
}
