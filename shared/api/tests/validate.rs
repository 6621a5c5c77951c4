//! `POST /api/workflows/validate`: the problems submit would find, at the same field paths the
//! CLI prints, and nothing stored.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use axum::http::{Method, StatusCode};
use common::{Client, runs_count};
use rara_domain::config::Config;
use rara_domain::workflow::{Error as WorkflowError, Format, WorkflowDefinition};
use serde_json::{Value, json};
use sqlx::PgPool;

/// A reference to a step that is not a dependency, and a `depends_on` naming no step.
const BROKEN: &str = "name: broken\ninputs: {date: {type: string}}\nsteps:\n  \
    - {name: fetch, operation: noop}\n  \
    - {name: split, operation: noop, input: {text: {$output: fech, pointer: /body}}}\n  \
    - {name: stats, operation: noop, depends_on: [nope]}\n";

/// The problems the domain's checks give, as `rara workflow register` prints them.
fn domain_problems(text: &str) -> Vec<(String, String)> {
    let config = Config::from_lookup("test", |_| None).unwrap();
    let definition = WorkflowDefinition::parse(text, Format::Yaml).unwrap();
    let builtins = rara_builtins::registry().unwrap();
    match definition.check_for_register(&config, |op, v| builtins.in_process(op, v).is_some()) {
        Err(WorkflowError::Invalid(problems)) => problems.into_iter().map(|p| (p.path, p.message)).collect(),
        other => panic!("expected problems, got {other:?}"),
    }
}

fn problems_of(body: &Value) -> Vec<(String, String)> {
    let problems = body["problems"].as_array().unwrap();
    problems
        .iter()
        .map(|p| (p["path"].as_str().unwrap().to_owned(), p["message"].as_str().unwrap().to_owned()))
        .collect()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_wrong_reference_is_a_problem_at_its_path_and_nothing_is_stored(pool: PgPool) {
    let client = Client::new(pool.clone());
    let (status, body) = client.post("/api/workflows/validate", json!({"definition": BROKEN})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["valid"], false);
    let problems = problems_of(&body);
    assert_eq!(problems, domain_problems(BROKEN), "the CLI's problems, in its order");
    let paths: Vec<&str> = problems.iter().map(|(path, _)| path.as_str()).collect();
    assert!(paths.contains(&"steps[2].depends_on[0]"), "{paths:?}");
    assert!(paths.contains(&"steps[1].input.text"), "{paths:?}");
    assert_eq!(body["problems"][0]["field"], format!("definition.{}", problems[0].0));

    assert_eq!(runs_count(&pool).await, 0);
    let (_, listed) = client.get("/api/workflows").await;
    assert_eq!(listed["workflows"], json!([]), "a validation registers nothing");

    // A workflow named `validate` still has its versions at GET /api/workflows/validate.
    let (status, _) = client.get("/api/workflows/validate").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let named = json!({"name": "validate", "steps": [{"name": "a", "operation": "noop"}]});
    let (status, _) = client.post("/api/workflows", json!({"definition": named})).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, versions) = client.get("/api/workflows/validate").await;
    assert_eq!((status, versions["name"].clone()), (StatusCode::OK, json!("validate")), "{versions}");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn inputs_given_are_checked_as_submit_checks_them(pool: PgPool) {
    let client = Client::new(pool.clone());
    let definition = json!({"name": "dated", "inputs": {"date": {"type": "string"}},
        "steps": [{"name": "a", "operation": "noop", "input": {"d": {"$input": "/date"}}}]});
    let (status, body) = client.post("/api/workflows/validate", json!({"definition": definition})).await;
    assert_eq!((status, body.clone()), (StatusCode::OK, json!({"valid": true, "problems": []})));

    let request = json!({"definition": definition, "inputs": {}});
    let (_, body) = client.post("/api/workflows/validate", request).await;
    assert_eq!(body["valid"], false);
    assert_eq!(body["problems"][0]["path"], "inputs.date", "{body}");
    let request = json!({"definition": definition, "inputs": {"date": 3}});
    let (_, body) = client.post("/api/workflows/validate", request).await;
    assert_eq!(body["problems"][0]["field"], "definition.inputs.date", "{body}");
    let request = json!({"definition": definition, "inputs": {"date": "2026-12-06"}});
    let (_, body) = client.post("/api/workflows/validate", request).await;
    assert_eq!(body["valid"], true, "{body}");
    assert_eq!(runs_count(&pool).await, 0);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn an_unreadable_definition_is_one_problem_and_a_bad_request_an_error(pool: PgPool) {
    let client = Client::new(pool);
    let (status, body) = client.post("/api/workflows/validate", json!({"definition": "steps: [: oops"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!((body["valid"].clone(), body["problems"][0]["field"].clone()), (json!(false), json!("definition")));
    let unknown = json!({"definition": {"name": "x", "stepz": []}});
    let (_, body) = client.post("/api/workflows/validate", unknown).await;
    assert!(body["problems"][0]["message"].as_str().unwrap().contains("stepz"), "{body}");

    let (status, body) = client.post("/api/workflows/validate", json!({"definition": 7})).await;
    assert_eq!((status, body["code"].clone()), (StatusCode::BAD_REQUEST, json!("bad_request")));
    let (status, body) = client.post("/api/workflows/validate", json!({"definition": {}, "extra": 1})).await;
    assert_eq!((status, body["field"].clone()), (StatusCode::BAD_REQUEST, json!("extra")));
    let (status, body) = client.post("/api/workflows/validate", json!([{}, null])).await;
    assert_eq!(
        (status, body["code"].clone()),
        (StatusCode::BAD_REQUEST, json!("bad_request")),
        "an array is no request"
    );
    // Anyone who may read may validate: no token needed on loopback.
    let request = Some(("application/json", br#"{"definition": {"name": "n", "steps": []}}"#.to_vec()));
    let (status, text) = client.send(Method::POST, "/api/workflows/validate", None, request).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(text.contains("at least one step"), "{text}");
}
