//! Two `api` containers behind one URL: the built binary, run twice as two processes, each
//! polling its own Lambda Runtime API (a small emulator here) and fetching the console key from
//! the same LocalStack secret, as the template wires them. A form rendered by one is accepted
//! by the other; a third container with another secret refuses it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::routing::{get, post};
use serde_json::{Value, json};
use sqlx::PgPool;
use tokio::sync::{Mutex, mpsc, oneshot};
use uuid::Uuid;

/// One container's Lambda Runtime API: hands out events, collects the function's answers.
#[derive(Clone)]
struct RuntimeApi {
    events: Arc<Mutex<mpsc::Receiver<(String, Value)>>>,
    waiting: Arc<Mutex<HashMap<String, oneshot::Sender<Value>>>>,
}

async fn next(State(api): State<RuntimeApi>) -> (HeaderMap, Json<Value>) {
    let (id, event) = api.events.lock().await.recv().await.expect("events while the test runs");
    let mut headers = HeaderMap::new();
    let deadline = chrono::Utc::now().timestamp_millis() + 29_000;
    headers.insert("lambda-runtime-aws-request-id", HeaderValue::from_str(&id).unwrap());
    headers.insert("lambda-runtime-deadline-ms", HeaderValue::from_str(&deadline.to_string()).unwrap());
    headers.insert(
        "lambda-runtime-invoked-function-arn",
        HeaderValue::from_static("arn:aws:lambda:us-east-1:123456789012:function:rara-api"),
    );
    (headers, Json(event))
}

async fn answer(State(api): State<RuntimeApi>, Path((id, kind)): Path<(String, String)>, body: String) {
    let value: Value = serde_json::from_str(&body).unwrap_or(Value::String(body));
    if let Some(waiting) = api.waiting.lock().await.remove(&id) {
        let _ = waiting.send(json!({ kind: value }));
    }
}

/// A running `api` process and the way to invoke it.
struct Container {
    events: mpsc::Sender<(String, Value)>,
    waiting: Arc<Mutex<HashMap<String, oneshot::Sender<Value>>>>,
    process: Child,
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

impl Container {
    async fn start(database_url: &str, secret_arn: &str) -> Self {
        let (events, receiver) = mpsc::channel(8);
        let runtime = RuntimeApi { events: Arc::new(Mutex::new(receiver)), waiting: Arc::default() };
        let app = axum::Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route("/2018-06-01/runtime/invocation/{id}/{kind}", post(answer))
            .with_state(runtime.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let mut command = Command::new(env!("CARGO_BIN_EXE_api"));
        command.env_clear().stdout(std::process::Stdio::null());
        // LocalStack's endpoint and credentials (`scripts/localstack.sh env`), and the PATH.
        command.envs(std::env::vars().filter(|(k, _)| k.starts_with("AWS_") || k == "PATH"));
        command.envs([
            ("AWS_LAMBDA_RUNTIME_API", addr.to_string().as_str()),
            ("AWS_LAMBDA_FUNCTION_NAME", "rara-api"),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256"),
            ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST"),
            ("DATABASE_URL", database_url),
            ("RARA_QUEUE_URL", "http://localhost:4566/000000000000/unused-by-the-api"),
            // What the template sets.
            (api::AUTH_VAR, "iam"),
            (api::CONSOLE_KEY_SECRET_VAR, secret_arn),
        ]);
        let process = command.spawn().expect("start the api binary");
        Container { events, waiting: runtime.waiting, process }
    }

    /// Invokes the function with a function URL event; its API Gateway v2 response.
    async fn invoke(&self, event: Value) -> Value {
        let id = Uuid::new_v4().to_string();
        let (sender, receiver) = oneshot::channel();
        self.waiting.lock().await.insert(id.clone(), sender);
        self.events.send((id, event)).await.unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(30), receiver).await.expect("an answer").unwrap();
        answer.get("response").cloned().unwrap_or_else(|| panic!("the function failed: {answer}"))
    }
}

/// A function URL event of `method` on `path`, with a form body when given.
fn event(method: &str, path: &str, form: Option<&str>) -> Value {
    let fixture = format!("{}/tests/fixtures/list-runs.json", env!("CARGO_MANIFEST_DIR"));
    let mut event: Value = serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    event["rawPath"] = path.into();
    event["rawQueryString"] = "".into();
    event.as_object_mut().unwrap().remove("queryStringParameters");
    event["requestContext"]["http"]["method"] = method.into();
    event["requestContext"]["http"]["path"] = path.into();
    if let Some(form) = form {
        event["headers"]["content-type"] = "application/x-www-form-urlencoded".into();
        event["body"] = form.into();
    }
    event
}

async fn secret_arn() -> String {
    let value = format!("{}{}", Uuid::new_v4().simple(), Uuid::new_v4().simple());
    let client = rara_testkit::secrets_client().await;
    let name = format!("rara-test-console-key-{}", Uuid::new_v4().simple());
    let created = client.create_secret().name(name).secret_string(value).send().await.expect("a LocalStack secret");
    created.arn().unwrap().to_owned()
}

fn status(response: &Value) -> u64 {
    response["statusCode"].as_u64().unwrap()
}

async fn run_status(pool: &PgPool, run: &str) -> String {
    let run: Uuid = run.parse().unwrap();
    sqlx::query_scalar("SELECT status::text FROM workflow_runs WHERE id = $1").bind(run).fetch_one(pool).await.unwrap()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_form_rendered_by_one_container_is_accepted_by_another_sharing_the_secret(pool: PgPool) {
    let database = pool.connect_options().get_database().unwrap().to_owned();
    let url = format!("postgres://postgres@127.0.0.1:5432/{database}");
    let shared = secret_arn().await;
    let one = Container::start(&url, &shared).await;
    let two = Container::start(&url, &shared).await;
    let other = Container::start(&url, &secret_arn().await).await;

    let fixture = format!("{}/tests/fixtures/submit-run.json", env!("CARGO_MANIFEST_DIR"));
    let submitted = one.invoke(serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap()).await;
    assert_eq!(status(&submitted), 201, "{submitted}");
    let run =
        serde_json::from_str::<Value>(submitted["body"].as_str().unwrap()).unwrap()["id"].as_str().unwrap().to_owned();
    let page = one.invoke(event("GET", &format!("/runs/{run}"), None)).await;
    let html = page["body"].as_str().unwrap();
    let at = html.find(r#"name="csrf" value=""#).expect("a form") + r#"name="csrf" value=""#.len();
    let form = format!("csrf={}&reason=", &html[at..at + html[at..].find('"').unwrap()]);
    let cancel = format!("/runs/{run}/cancel");

    let refused = other.invoke(event("POST", &cancel, Some(&form))).await;
    assert_eq!(status(&refused), 403, "another secret, another key: {refused}");
    assert_eq!(run_status(&pool, &run).await, "running");

    let accepted = two.invoke(event("POST", &cancel, Some(&form))).await;
    assert_eq!(status(&accepted), 303, "the other container of the same secret accepts it: {accepted}");
    assert_eq!(run_status(&pool, &run).await, "cancelled");
}
