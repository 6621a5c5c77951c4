//! The egress policy of `http.request` against real servers on loopback: a "metadata" server
//! on 127.0.0.1 that records every request it receives, and "public" servers on 127.0.0.2 and
//! 127.0.0.3 that the tests open as if they were on the internet.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use common::context;
use rara_builtins::egress::Policy;
use rara_builtins::http_request::HTTP_REDIRECT;
use rara_builtins::{BuiltinsConfig, HttpRequest};
use rara_domain::StepError;
use rara_domain::executor::Executor;
use rara_domain::step_error::codes::EGRESS_DENIED;
use serde_json::{Value, json};

/// One request a server received.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    headers: HeaderMap,
}

/// A server that records every request. `redirects` maps a path to a status and a
/// `Location`; `/hop/N` redirects to `/hop/N+1` forever, `/chain/N` down to `/chain/0`; any
/// other path answers 200.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<Seen>>,
    redirects: Mutex<HashMap<String, (u16, String)>>,
}

impl Recorder {
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
    fn redirect(&self, path: &str, status: u16, location: String) {
        self.redirects.lock().unwrap().insert(path.to_owned(), (status, location));
    }
}

async fn record(State(server): State<Arc<Recorder>>, method: Method, uri: Uri, headers: HeaderMap) -> Response {
    let path = uri.path().to_owned();
    server.seen.lock().unwrap().push(Seen { method: method.to_string(), path: path.clone(), headers });
    let redirect = |status: u16, location: String| {
        (StatusCode::from_u16(status).unwrap(), [(header::LOCATION, location)]).into_response()
    };
    if let Some((status, location)) = server.redirects.lock().unwrap().get(&path).cloned() {
        return redirect(status, location);
    }
    if let Some(n) = path.strip_prefix("/hop/").and_then(|n| n.parse::<u32>().ok()) {
        return redirect(302, format!("/hop/{}", n + 1));
    }
    if let Some(n) = path.strip_prefix("/chain/").and_then(|n| n.parse::<u32>().ok()).filter(|n| *n > 0) {
        return redirect(302, format!("/chain/{}", n - 1));
    }
    "ok".into_response()
}

/// A recording server on `ip` and a fresh port; returns its port.
async fn serve(ip: &str) -> (u16, Arc<Recorder>) {
    let server = Arc::new(Recorder::default());
    let app = Router::new().fallback(any(record)).with_state(server.clone());
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (port, server)
}

/// `http.request` with `cidrs` opened.
async fn run(cidrs: &str, input: Value) -> Result<Value, StepError> {
    let config = BuiltinsConfig { egress: Policy::opening(cidrs).unwrap(), ..BuiltinsConfig::default() };
    HttpRequest::new(&config).unwrap().execute(context(Duration::from_secs(30)), input).await
}

fn assert_denied(err: &StepError, host: &str) {
    assert_eq!(err.code, EGRESS_DENIED, "{err:?}");
    assert!(!err.retryable, "{err:?}");
    assert_eq!(err.details["host"], host, "{err:?}");
    let shown = format!("{} {}", err.message, err.details);
    for hidden in ["latest", "token", "s3cret"] {
        assert!(!shown.contains(hidden), "{hidden} in {shown}");
    }
}

#[tokio::test]
async fn every_way_to_the_metadata_server_is_refused_until_its_cidr_is_opened() {
    let (port, metadata) = serve("127.0.0.1").await;
    let (public_port, public) = serve("127.0.0.2").await;
    public.redirect("/go", 302, format!("http://127.0.0.1:{port}/latest/meta-data/?token=s3cret"));
    let urls = [
        format!("http://127.0.0.1:{port}/latest/api/token"),
        format!("http://localhost:{port}/latest/api/token"),
        format!("http://[::ffff:127.0.0.1]:{port}/latest/api/token"),
        format!("http://2130706433:{port}/latest/api/token"),
        format!("http://127.0.0.2:{public_port}/go"),
    ];
    let hosts = ["127.0.0.1", "localhost", "[::ffff:7f00:1]", "127.0.0.1", "127.0.0.1"];

    for (url, host) in urls.iter().zip(hosts) {
        let err = run("127.0.0.2/32", json!({ "method": "PUT", "url": url })).await.unwrap_err();
        assert_denied(&err, host);
        assert_eq!(err.details["rule"], "loopback", "{url}");
    }
    assert!(metadata.seen().is_empty(), "the metadata server was reached: {:?}", metadata.seen());
    assert_eq!(public.seen().len(), 1, "the redirecting server answered once");

    for url in &urls {
        let output = run("127.0.0.1/32,127.0.0.2/32", json!({ "method": "PUT", "url": url })).await.unwrap();
        assert_eq!(output["status"], 200, "{url}");
    }
    assert_eq!(metadata.seen().len(), urls.len(), "with its CIDR opened, each request arrives");
}

#[tokio::test]
async fn a_redirect_to_another_host_carries_only_safe_headers() {
    let (a_port, a) = serve("127.0.0.2").await;
    let (b_port, b) = serve("127.0.0.3").await;
    a.redirect("/away", 302, format!("http://127.0.0.3:{b_port}/landed"));
    a.redirect("/here", 307, "/landed".to_owned());
    let headers = json!({ "authorization": "Bearer s3cret", "x-api-key": "k3y", "accept": "text/plain" });
    let open = "127.0.0.2/32,127.0.0.3/32";

    let output = run(open, json!({ "url": format!("http://127.0.0.2:{a_port}/away"), "headers": headers })).await;
    assert_eq!(output.unwrap()["status"], 200);
    let landed = &b.seen()[0];
    assert_eq!(landed.path, "/landed");
    assert!(landed.headers.get("authorization").is_none(), "{:?}", landed.headers);
    assert!(landed.headers.get("x-api-key").is_none(), "{:?}", landed.headers);
    assert_eq!(landed.headers["accept"], "text/plain");

    // The same origin keeps them.
    run(open, json!({ "url": format!("http://127.0.0.2:{a_port}/here"), "headers": headers })).await.unwrap();
    let same = a.seen().into_iter().find(|s| s.path == "/landed").unwrap();
    assert_eq!(same.headers["authorization"], "Bearer s3cret");
}

#[tokio::test]
async fn a_307_that_would_resend_the_body_to_another_origin_is_refused() {
    let (a_port, a) = serve("127.0.0.2").await;
    let (b_port, b) = serve("127.0.0.3").await;
    a.redirect("/temp", 307, format!("http://127.0.0.3:{b_port}/collect"));
    let input =
        json!({ "method": "POST", "url": format!("http://127.0.0.2:{a_port}/temp"), "body": "password=s3cret" });
    let err = run("127.0.0.2/32,127.0.0.3/32", input).await.unwrap_err();
    assert_denied(&err, "127.0.0.2");
    assert_eq!(err.details["rule"], "body-to-other-origin");
    assert!(b.seen().is_empty(), "{:?}", b.seen());

    // A 303 drops the body and becomes a GET: that one is followed.
    a.redirect("/other", 303, format!("http://127.0.0.3:{b_port}/collect"));
    let input = json!({ "method": "POST", "url": format!("http://127.0.0.2:{a_port}/other"), "body": "s3cret" });
    run("127.0.0.2/32,127.0.0.3/32", input).await.unwrap();
    assert_eq!(b.seen().iter().map(|s| s.method.as_str()).collect::<Vec<_>>(), ["GET"]);
}

#[tokio::test]
async fn five_redirects_are_followed_and_a_sixth_is_refused() {
    let (port, server) = serve("127.0.0.2").await;
    let five = run("127.0.0.2/32", json!({ "url": format!("http://127.0.0.2:{port}/chain/5") })).await.unwrap();
    assert_eq!(five["status"], 200);
    assert_eq!(server.seen().len(), 6);

    let err = run("127.0.0.2/32", json!({ "url": format!("http://127.0.0.2:{port}/hop/0") })).await.unwrap_err();
    assert_eq!((err.code.as_str(), err.retryable), (HTTP_REDIRECT, false));
    let paths: Vec<String> = server.seen().into_iter().skip(6).map(|s| s.path).collect();
    assert_eq!(paths, ["/hop/0", "/hop/1", "/hop/2", "/hop/3", "/hop/4", "/hop/5"], "the sixth hop was not sent");
}

#[tokio::test]
async fn an_allowlist_of_hosts_opens_exactly_those_names() {
    let (port, server) = serve("127.0.0.1").await;
    let vars = [("RARA_HTTP_EGRESS", "allowlist"), ("RARA_HTTP_ALLOW_HOSTS", "localhost")];
    let policy = Policy::from_lookup(|var| vars.iter().find(|(k, _)| *k == var).map(|(_, v)| (*v).to_owned())).unwrap();
    let executor = HttpRequest::new(&BuiltinsConfig { egress: policy, ..BuiltinsConfig::default() }).unwrap();

    let output = executor
        .execute(context(Duration::from_secs(30)), json!({ "url": format!("http://localhost:{port}/ok") }))
        .await
        .unwrap();
    assert_eq!(output["status"], 200);
    let err = executor
        .execute(context(Duration::from_secs(30)), json!({ "url": format!("http://127.0.0.1:{port}/ok") }))
        .await
        .unwrap_err();
    assert_denied(&err, "127.0.0.1");
    assert_eq!(err.details["rule"], "not-allowlisted");
    assert_eq!(server.seen().len(), 1, "only the named host's request arrived");
}
