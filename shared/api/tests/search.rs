//! The runs search over a real Postgres (issue 48): `GET /api/runs` by error code, by workflow
//! at a version and by input fields, each returning exactly the runs that match; bulk actions
//! on the same search; bad filters refused with the parameter named; and the console's runs
//! list carrying every filter in its form, its links and its bulk forms.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;

use axum::http::{Method, StatusCode};
use common::Client;
use serde_json::{Value, json};
use sqlx::PgPool;

/// A workflow with inputs, registered twice (versions 1 and 2).
const V1: &str = "name: billing\ninputs: {tenant: {type: string}, region: {type: string}, limits: {type: object, default: {}}}\n\
                  steps: [{name: a, operation: noop}, {name: b, operation: noop, depends_on: [a]}]\n";
const V2: &str = "name: billing\ninputs: {tenant: {type: string}, region: {type: string}, limits: {type: object, default: {}}}\n\
                  steps: [{name: a, operation: noop}, {name: b, operation: noop, depends_on: [a]}, {name: c, operation: noop}]\n";

/// The runs of the test, by letter.
struct Runs {
    /// v1, tenant acme in eu with limits {max: 5}; step `a` failed with E_BROKEN.
    a: String,
    /// v1, tenant acme in us; step `a` cancelled (code CANCELLED).
    b: String,
    /// v2, tenant other in eu; step `b` failed with E_OTHER.
    c: String,
    /// Another workflow (demo-api), no inputs.
    d: String,
}

async fn runs(client: &Client, pool: &PgPool) -> Runs {
    for v in [V1, V2] {
        let (status, body) = client.post("/api/workflows", json!({"definition": v})).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let run = |version: i64, inputs: Value| async move {
        let (status, body) =
            client.post("/api/workflows/billing/runs", json!({"version": version, "inputs": inputs})).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body["id"].as_str().unwrap().to_owned()
    };
    let a = run(1, json!({"tenant": "acme", "region": "eu", "limits": {"max": 5}})).await;
    let b = run(1, json!({"tenant": "acme", "region": "us"})).await;
    let c = run(2, json!({"tenant": "other", "region": "eu"})).await;
    let d = client.submit_demo().await;
    for (run, step, status, code) in
        [(&a, "a", "failed", "E_BROKEN"), (&b, "a", "cancelled", "CANCELLED"), (&c, "b", "failed", "E_OTHER")]
    {
        sqlx::query(
            "UPDATE steps SET status = $3::rara_step_status, finished_at = now(),
                    error = jsonb_build_object('code', $4::text, 'message', 'm', 'retryable', false)
             WHERE run_id = $1 AND name = $2",
        )
        .bind(run.parse::<uuid::Uuid>().unwrap())
        .bind(step)
        .bind(status)
        .bind(code)
        .execute(pool)
        .await
        .unwrap();
        // The run's counters, as the transition keeps them (the run goes on: its other steps).
        sqlx::query(
            "UPDATE workflow_runs SET steps_unfinished = steps_unfinished - 1,
                    steps_failed = steps_failed + ($2 = 'failed')::int, steps_cancelled = steps_cancelled + ($2 = 'cancelled')::int
             WHERE id = $1",
        )
        .bind(run.parse::<uuid::Uuid>().unwrap())
        .bind(status)
        .execute(pool)
        .await
        .unwrap();
    }
    Runs { a, b, c, d }
}

/// The ids `GET /api/runs?<query>` lists.
async fn listed(client: &Client, query: &str) -> BTreeSet<String> {
    let (status, page) = client.get(&format!("/api/runs?{query}")).await;
    assert_eq!(status, StatusCode::OK, "{query}: {page}");
    page["runs"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect()
}

fn set(ids: &[&String]) -> BTreeSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn each_filter_lists_exactly_the_runs_that_match(pool: PgPool) {
    let client = Client::new(pool.clone());
    let Runs { a, b, c, d } = runs(&client, &pool).await;

    assert_eq!(listed(&client, "error=E_BROKEN").await, set(&[&a]));
    assert_eq!(listed(&client, "error=CANCELLED").await, set(&[&b]));
    assert_eq!(listed(&client, "error=E_NONE").await, set(&[]));
    assert_eq!(listed(&client, "workflow=billing").await, set(&[&a, &b, &c]));
    assert_eq!(listed(&client, "workflow=billing%401").await, set(&[&a, &b]));
    assert_eq!(listed(&client, "workflow=billing@2").await, set(&[&c]));
    assert_eq!(listed(&client, "workflow=demo-api").await, set(&[&d]));
    assert_eq!(listed(&client, "where=inputs.tenant%3Dacme").await, set(&[&a, &b]));
    assert_eq!(listed(&client, "where=inputs.tenant=acme&where=inputs.region=eu").await, set(&[&a]));
    assert_eq!(listed(&client, "where=inputs.region=eu").await, set(&[&a, &c]));
    assert_eq!(listed(&client, "where=inputs.limits.max=5").await, set(&[&a]));
    assert_eq!(listed(&client, "where=inputs.limits.max=%225%22").await, set(&[]), "the string \"5\" is not 5");
    assert_eq!(listed(&client, "where=inputs.tenant=nobody").await, set(&[]));
    assert_eq!(listed(&client, "where=inputs.region=eu&error=E_OTHER&workflow=billing@2").await, set(&[&c]));
    assert_eq!(listed(&client, "where=inputs.region=eu&error=E_OTHER&workflow=billing@1").await, set(&[]));
    assert_eq!(listed(&client, "where=&error=&workflow=").await, set(&[&a, &b, &c, &d]), "empty is no filter");

    // Paged: the cursor keeps the search.
    let (_, first) = client.get("/api/runs?where=inputs.tenant=acme&limit=1").await;
    let cursor = first["next_cursor"].as_str().expect("a second page");
    let second = listed(&client, &format!("where=inputs.tenant=acme&limit=1&cursor={cursor}")).await;
    assert_eq!(second, set(&[&a]), "newest first: b, then a");

    // A bulk action acts on the same search.
    let body = json!({"where": ["inputs.tenant=acme"], "error": "CANCELLED", "dry_run": true});
    let (status, counted) = client.post("/api/bulk/retry", body).await;
    assert_eq!((status, counted["matched"].clone()), (StatusCode::OK, json!(1)), "b's cancelled step: {counted}");
    let (status, cancelled) =
        client.post("/api/bulk/cancel", json!({"workflow": "billing@1", "where": ["inputs.region=us"]})).await;
    assert_eq!((status, cancelled["matched"].clone()), (StatusCode::OK, json!(1)), "{cancelled}");
    for (run, status) in [(&a, "running"), (&b, "cancelled"), (&c, "running"), (&d, "running")] {
        assert_eq!(client.get(&format!("/api/runs/{run}")).await.1["status"], status, "{run}");
    }
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn bad_filters_are_refused_naming_the_parameter(pool: PgPool) {
    let client = Client::new(pool.clone());
    client.submit_demo().await;
    let long_code = "E".repeat(129);
    let long_value = format!("inputs.k={}", "v".repeat(257));
    let deep = format!("inputs.{}=1", ["a"; 9].join("."));
    let five = "where=inputs.a=1&where=inputs.b=1&where=inputs.c=1&where=inputs.d=1&where=inputs.e=1";
    for (query, field) in [
        ("error=E%20BROKEN", "error"),
        (&*format!("error={long_code}"), "error"),
        ("error=E%27%3B", "error"),
        ("workflow=billing@0", "workflow"),
        ("workflow=billing@x", "workflow"),
        ("workflow=@1", "workflow"),
        ("workflow=billing&name=billing", "workflow"),
        ("where=tenant=acme", "where[0]"),
        ("where=outputs.a.b=1", "where[0]"),
        ("where=inputs.a%20b=1", "where[0]"),
        ("where=inputs.a=%7B%22b%22%3A1%7D", "where[0]"),
        (&*format!("where={long_value}"), "where[0]"),
        (&*format!("where={deep}"), "where[0]"),
        ("where=inputs.a=1&where=inputs.a.b=1", "where[1]"),
        (five, "where"),
    ] {
        let (status, body) = client.get(&format!("/api/runs?{query}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert_eq!(body["field"], field, "{query}: {body}");
        assert_eq!(body["code"], "bad_request");
    }
    let (status, body) = client.post("/api/bulk/cancel", json!({"where": ["inputs.x"], "dry_run": true})).await;
    assert_eq!((status, body["field"].clone()), (StatusCode::BAD_REQUEST, json!("where[0]")), "{body}");
    let (status, body) = client.post("/api/bulk/retry", json!({"error": "no spaces please"})).await;
    assert_eq!((status, body["field"].clone()), (StatusCode::BAD_REQUEST, json!("error")), "{body}");
    assert_eq!(client.get("/api/runs?unknown=1").await.0, StatusCode::BAD_REQUEST, "unknown parameters still refused");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_console_search_round_trips_every_filter_and_its_bulk_action_acts_on_it(pool: PgPool) {
    let client = Client::new(pool.clone());
    let Runs { a, b, c, d } = runs(&client, &pool).await;
    let session = client.session().await;
    let cookie = Some(session.as_str());
    let search = "/?workflow=billing%401&where=inputs.tenant%3Dacme&where=inputs.region%3Dus&error=CANCELLED";
    let (status, _, html) = common::page(&client, Method::GET, search, cookie, None).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains(&b) && ![&a, &c, &d].iter().any(|r| html.contains(r.as_str())), "only b");
    assert!(!html.contains(r#"id="overview""#), "a search is not the landing page");
    for field in [
        r#"name="workflow" value="billing@1""#,
        r#"name="error" value="CANCELLED""#,
        r#"name="where" value="inputs.tenant=acme""#,
        r#"name="where" value="inputs.region=us""#,
    ] {
        // In the search form, and in each of the two bulk forms as a hidden field.
        assert_eq!(html.matches(field).count(), 3, "{field}:\n{html}");
    }

    // Each filter alone narrows the console's list as the API's.
    for (search, only) in [("/?where=inputs.region%3Dus", &b), ("/?error=E_BROKEN", &a), ("/?workflow=billing%402", &c)]
    {
        let (_, _, html) = common::page(&client, Method::GET, search, cookie, None).await;
        let listed: Vec<&String> = [&a, &b, &c, &d].into_iter().filter(|r| html.contains(r.as_str())).collect();
        assert_eq!(listed, vec![only], "{search}");
    }

    let csrf = common::csrf_of(&html);
    let form = format!(
        "csrf={csrf}&action=cancel&workflow=billing%401&where=inputs.tenant%3Dacme&where=&where=inputs.region%3Dus&error=CANCELLED"
    );
    let (_, _, confirm) = common::page(&client, Method::POST, "/bulk", cookie, Some(form.clone())).await;
    assert!(confirm.contains("1 running runs to cancel"), "{confirm}");
    assert!(confirm.contains(r#"name="where" value="inputs.region=us""#), "the confirmation carries the search");
    common::page(&client, Method::POST, "/bulk", cookie, Some(format!("{form}&confirmed=yes"))).await;
    for (run, status) in [(&a, "running"), (&b, "cancelled"), (&c, "running"), (&d, "running")] {
        assert_eq!(client.get(&format!("/api/runs/{run}")).await.1["status"], status, "{run}");
    }

    let (status, _, refused) = common::page(&client, Method::GET, "/?where=inputs.a%20b%3D1", None, None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(refused.contains("where[0]"), "{refused}");
}
