//! The console as the `api` Lambda serves it, over a real Postgres: a page view changes no
//! database state and holds no stream open (pages are `Updates::Static`), and two instances
//! whose console key comes from one Secrets Manager secret (LocalStack's) accept each other's
//! forms, while an instance with another key refuses them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use http_body_util::BodyExt;
use lambda_http::Request;
use rara_api::ConsoleKey;
use rara_domain::config::Config;
use serde_json::Value;
use sqlx::PgPool;
use tower::ServiceExt;
use uuid::Uuid;

/// A function URL event (payload 2.0) of `method` on `path` from an IAM caller, with a form body.
fn event(method: &str, path: &str, form: Option<&str>) -> Request {
    let fixture = format!("{}/tests/fixtures/list-runs.json", env!("CARGO_MANIFEST_DIR"));
    let mut event: Value = serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    event["rawPath"] = path.into();
    event["rawQueryString"] = "".into();
    event.as_object_mut().unwrap().remove("queryStringParameters");
    event["requestContext"]["http"]["method"] = method.into();
    event["requestContext"]["http"]["path"] = path.into();
    event["headers"]["accept"] = "text/html".into();
    if let Some(form) = form {
        event["headers"]["content-type"] = "application/x-www-form-urlencoded".into();
        event["body"] = form.into();
    }
    lambda_http::request::from_str(&event.to_string()).unwrap()
}

/// An API instance as `main.rs` builds it behind the IAM function URL, with `key`.
fn instance(pool: &PgPool, key: &ConsoleKey) -> axum::Router {
    let policy = api::Policy::from_lookup(|k| (k == api::AUTH_VAR).then(|| "iam".to_owned())).unwrap();
    let config = Config::from_lookup("test", |_| None).unwrap();
    api::router(rara_api::Api::new(rara_store::Store::new(pool.clone()), config, policy.auth(key)).unwrap())
}

/// The status and the whole body; a body that does not end within five seconds fails the test
/// (an open stream would hold a buffered function URL's invocation until its timeout).
async fn complete(router: &axum::Router, request: Request) -> (u16, String) {
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let body = tokio::time::timeout(Duration::from_secs(5), response.into_body().collect())
        .await
        .expect("the response is complete, no open stream")
        .unwrap()
        .to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

async fn submit(router: &axum::Router) -> Uuid {
    let fixture = format!("{}/tests/fixtures/submit-run.json", env!("CARGO_MANIFEST_DIR"));
    let request = lambda_http::request::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    let (status, body) = complete(router, request).await;
    assert_eq!(status, 201, "{body}");
    serde_json::from_str::<Value>(&body).unwrap()["id"].as_str().unwrap().parse().unwrap()
}

/// What a console page could change: every trigger's `tgenabled`, and the registrations.
async fn console_state(pool: &PgPool) -> (String, i64) {
    let triggers: String = sqlx::query_scalar(
        "SELECT string_agg(c.relname || '.' || t.tgname || '=' || t.tgenabled::text, ',' ORDER BY c.relname, t.tgname)
         FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid WHERE NOT t.tgisinternal",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    let listeners: i64 = sqlx::query_scalar("SELECT count(*) FROM console_listeners").fetch_one(pool).await.unwrap();
    (triggers, listeners)
}

/// The CSRF token the page's forms carry.
fn csrf_of(html: &str) -> String {
    let at = html.find(r#"name="csrf" value=""#).expect("a form with the CSRF token") + r#"name="csrf" value=""#.len();
    html[at..at + html[at..].find('"').unwrap()].to_owned()
}

async fn run_status(pool: &PgPool, run: Uuid) -> String {
    sqlx::query_scalar("SELECT status::text FROM workflow_runs WHERE id = $1").bind(run).fetch_one(pool).await.unwrap()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn an_anonymous_page_view_under_lambda_changes_nothing_and_holds_no_stream(pool: PgPool) {
    let router = instance(&pool, &ConsoleKey::random());
    let run = submit(&router).await;
    let before = console_state(&pool).await;
    assert_eq!(before.1, 0);

    for path in ["/".to_owned(), format!("/runs/{run}")] {
        let (status, html) = complete(&router, event("GET", &path, None)).await;
        assert_eq!(status, 200, "{path}: {html}");
        assert!(html.contains(&run.to_string()), "{path} shows the run");
        assert!(!html.contains("EventSource") && !html.contains("/events"), "{path} has no live script");
        assert!(html.contains(r#"id="static-page""#), "{path} says it does not update itself");
    }
    // A tab rendered by a live server (or an old deploy) that asks for a stream is told to stop.
    for path in ["/events".to_owned(), format!("/runs/{run}/events")] {
        let (status, body) = complete(&router, event("GET", &path, None)).await;
        assert_eq!((status, body.as_str()), (204, ""), "{path}");
    }
    assert_eq!(console_state(&pool).await, before, "no trigger toggled, no listener registered");
}

/// The same routes on a live server (`rara ui`): the stream registers a listener and turns the
/// console's triggers on, which is what the Lambda-mode test above proves does not happen.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_live_servers_stream_registers_a_listener_and_turns_the_triggers_on(pool: PgPool) {
    let config = Config::from_lookup("test", |_| None).unwrap();
    let auth = rara_api::Auth::iam(&ConsoleKey::random());
    let live = rara_api::Api::new(rara_store::Store::new(pool.clone()), config, auth).unwrap().router();
    let before = console_state(&pool).await;
    let (_, html) = complete(&live, event("GET", "/", None)).await;
    assert!(html.contains("raraLive('/events')") && html.contains("new EventSource(u)"), "the page is live");
    let stream = live.clone().oneshot(event("GET", "/events", None)).await.unwrap();
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    let after = console_state(&pool).await;
    assert_eq!(after.1, 1, "one registration while the tab is open");
    assert_ne!(after.0, before.0, "the console's triggers were turned on");
    let open = tokio::time::timeout(Duration::from_secs(2), stream.into_body().collect()).await;
    assert!(open.is_err(), "the stream is still open after two seconds");
}

/// The console key's material as the template's `GenerateSecretString` makes it.
const SECRET_CHARS: usize = 64;

async fn secret_arn() -> String {
    let value: String = (0..SECRET_CHARS / 32).map(|_| Uuid::new_v4().simple().to_string()).collect();
    rara_testkit::secrets_client()
        .await
        .create_secret()
        .name(format!("rara-test-console-key-{}", Uuid::new_v4().simple()))
        .secret_string(value)
        .send()
        .await
        .expect("create the secret in LocalStack")
        .arn()
        .unwrap()
        .to_owned()
}

/// The key as `main.rs` gets it: the policy of the template's variables, then one fetch.
async fn key_from(arn: &str) -> ConsoleKey {
    let vars = [(api::AUTH_VAR, "iam"), (api::CONSOLE_KEY_SECRET_VAR, arn)];
    let policy =
        api::Policy::from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned())).unwrap();
    let api::KeySource::Secret(arn) = &policy.key else { panic!("the secret is the key's source") };
    api::fetch_console_key(&rara_testkit::secrets_client().await, arn).await.unwrap()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_form_rendered_by_one_instance_is_accepted_by_another_sharing_the_secret(pool: PgPool) {
    let shared = secret_arn().await;
    let (one, two) = (instance(&pool, &key_from(&shared).await), instance(&pool, &key_from(&shared).await));
    let other = instance(&pool, &key_from(&secret_arn().await).await);
    let run = submit(&one).await;
    let (status, html) = complete(&one, event("GET", &format!("/runs/{run}"), None)).await;
    assert_eq!(status, 200);
    let form = format!("csrf={}&reason=", csrf_of(&html));
    let cancel = format!("/runs/{run}/cancel");

    let (status, body) = complete(&other, event("POST", &cancel, Some(&form))).await;
    assert_eq!(status, 403, "another secret, another key: {body}");
    assert_eq!(run_status(&pool, run).await, "running", "the refused form changed nothing");

    let (status, body) = complete(&two, event("POST", &cancel, Some(&form))).await;
    assert_eq!(status, 303, "the instance sharing the secret accepts the form: {body}");
    assert_eq!(run_status(&pool, run).await, "cancelled");
}

#[tokio::test]
async fn a_short_or_missing_console_key_secret_stops_the_start_without_quoting_it() {
    let client = rara_testkit::secrets_client().await;
    let short = client
        .create_secret()
        .name(format!("rara-test-console-key-{}", Uuid::new_v4().simple()))
        .secret_string("hunter2")
        .send()
        .await
        .unwrap();
    let error = api::fetch_console_key(&client, short.arn().unwrap()).await.unwrap_err().to_string();
    assert!(error.contains("shorter than") && !error.contains("hunter2"), "{error}");
    let missing = api::fetch_console_key(&client, "rara-test-no-such-secret").await.unwrap_err().to_string();
    assert!(missing.contains("cannot fetch the console key secret rara-test-no-such-secret"), "{missing}");
}

/// The measurement of `docs/src/internals/api-console.md` "Under Lambda": what one open tab
/// costs with each kind of page, held to the template's timeout (29 s). Slow, so ignored:
/// `cargo test -p api --test console -- --ignored --nocapture`.
#[ignore = "holds a stream for the API function's 29 s timeout"]
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn measure_one_open_tab_under_each_kind_of_page(pool: PgPool) {
    const TIMEOUT: Duration = Duration::from_secs(29);
    let triggers = "SELECT rara_console_triggers_enabled()";
    let config = Config::from_lookup("test", |_| None).unwrap();
    let api =
        rara_api::Api::new(rara_store::Store::new(pool.clone()), config, rara_api::Auth::iam(&ConsoleKey::random()));
    let api = api.unwrap();
    for (kind, router) in [("static (api function)", api::router(api.clone())), ("live (rara ui)", api.router())] {
        for path in ["/", "/events"] {
            let start = tokio::time::Instant::now();
            let response = router.clone().oneshot(event("GET", path, None)).await.unwrap();
            let (status, headers_after) = (response.status(), start.elapsed());
            let body = tokio::time::timeout(TIMEOUT, response.into_body().collect()).await;
            let finished = start.elapsed();
            let on: bool = sqlx::query_scalar(triggers).fetch_one(&pool).await.unwrap();
            let listeners = console_state(&pool).await.1;
            eprintln!(
                "{kind} GET {path}: {status} after {headers_after:?}; body {}; triggers on: {on}; listeners: {listeners}",
                match body {
                    Ok(_) => format!("complete after {finished:?}"),
                    Err(_) => format!("still open after {TIMEOUT:?}"),
                }
            );
            let live_stream = kind.starts_with("live") && path == "/events";
            assert_eq!(body.is_err(), live_stream, "only the live stream is open at the timeout");
            assert_eq!((on, listeners), if live_stream { (true, 1) } else { (false, 0) });
        }
    }
}
