//! The operator commands against a live stack (Postgres, LocalStack's SQS, the `rara`
//! runners): queue create, list, cancel, watch, retry, dlq list and redrive.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use rara_testkit::{Queues, endpoint};
use uuid::Uuid;

/// The environment of a live local stack for `rara`.
fn stack_env(queues: &Queues) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT_URL", endpoint()),
        ("AWS_ACCESS_KEY_ID", "test".into()),
        ("AWS_SECRET_ACCESS_KEY", "test".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("RARA_QUEUE_URL", queues.url.clone()),
        ("RARA_DLQ_URL", queues.dlq_url.clone()),
        ("RARA_SCHEDULER_POLL_MS", "100".into()),
    ]
}

fn run(db: &ScratchDb, env: &[(&'static str, String)], args: &[&str]) -> std::process::Output {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    db.rara_with(args, &env)
}

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", stdout(o), stderr(o)))
}

/// Rounds of one scheduler pass then the executor until the queue stays empty: one
/// round per level of the workflow's dependency graph.
fn work(db: &ScratchDb, env: &[(&'static str, String)], rounds: usize) {
    for _ in 0..rounds {
        let s = run(db, env, &["scheduler", "--once"]);
        assert!(s.status.success(), "{}", stderr(&s));
        let e = run(db, env, &["executor", "--until-idle", "--idle-seconds", "2"]);
        assert!(e.status.success(), "{}", stderr(&e));
    }
}

fn submit(db: &ScratchDb, yaml: &str) -> Uuid {
    let dir = tempdir();
    let file = write(&dir, "wf.yaml", yaml);
    let out = db.rara(&["submit", &file]);
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out).trim().parse().unwrap()
}

#[tokio::test]
async fn queue_create_makes_aligned_queues() {
    let queues = Queues::new(30, 10).await; // starts LocalStack when needed
    let db = ScratchDb::new();
    let name = format!("rara-cli-{}", Uuid::new_v4().simple());
    let env = stack_env(&queues);
    let out = run(&db, &env, &["queue", "create", "--name", &name, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let pair = json(&out);
    let url = pair["queue_url"].as_str().unwrap();
    assert!(pair["dlq_url"].as_str().unwrap().ends_with(&format!("{name}-dlq")));
    let attributes = queues
        .client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::All)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap();
    use aws_sdk_sqs::types::QueueAttributeName as A;
    assert_eq!(attributes[&A::VisibilityTimeout], "360", "RARA_VISIBILITY_TIMEOUT_SECONDS default");
    assert!(
        attributes[&A::RedrivePolicy].contains("\"maxReceiveCount\":\"10\"")
            || attributes[&A::RedrivePolicy].contains("\"maxReceiveCount\":10")
    );
    let text = run(&db, &env, &["queue", "create", "--name", &name]);
    assert!(stdout(&text).contains("export RARA_QUEUE_URL="), "idempotent, and prints export lines");
}

#[tokio::test]
async fn list_cancel_and_watch() {
    let queues = Queues::new(30, 10).await;
    let db = ScratchDb::new();
    let env = stack_env(&queues);
    assert!(db.rara(&["migrate"]).status.success());
    let first = submit(&db, "name: first\nsteps:\n  - {name: a, operation: noop}\n");
    let second = submit(
        &db,
        "name: second\nsteps:\n  - {name: a, operation: sleep, input: {seconds: 30}}\n  - {name: b, operation: noop, depends_on: [a]}\n",
    );

    let listed = json(&db.rara(&["list", "--json"]));
    assert_eq!(listed.as_array().unwrap().len(), 2);
    assert_eq!(listed[0]["id"], second.to_string(), "newest first");

    let cancelled = run(&db, &env, &["cancel", &second.to_string(), "--json"]);
    assert!(cancelled.status.success(), "{}", stderr(&cancelled));
    assert_eq!(json(&cancelled)["cancelled_steps"], 2);
    let only = json(&db.rara(&["list", "--status", "cancelled", "--json"]));
    assert_eq!(only.as_array().unwrap().len(), 1);
    assert_eq!(only[0]["id"], second.to_string());

    // Watching a run that ended other than succeeded exits 5; the table names the status.
    let watched = db.rara(&["watch", &second.to_string(), "--timeout-seconds", "20"]);
    assert_eq!(watched.status.code(), Some(5));
    assert!(stdout(&watched).contains("cancelled"));

    work(&db, &env, 1);
    let watched = db.rara(&["watch", &first.to_string(), "--json", "--timeout-seconds", "20"]);
    assert_eq!(watched.status.code(), Some(0), "{}", stderr(&watched));
    assert!(stdout(&watched).contains("\"succeeded\""));

    let pending = submit(&db, "name: never\nsteps:\n  - {name: a, operation: noop}\n");
    let timed_out = db.rara(&["watch", &pending.to_string(), "--timeout-seconds", "1"]);
    assert_eq!(timed_out.status.code(), Some(6), "a run still going when the timeout ends");
    assert!(stderr(&timed_out).contains("still running"), "{}", stderr(&timed_out));

    let missing = db.rara(&["cancel", &Uuid::new_v4().to_string()]);
    assert_eq!(missing.status.code(), Some(3));
    assert!(stderr(&missing).contains("not found"));
}

#[tokio::test]
async fn retry_revives_a_failed_step_and_its_run_then_succeeds() {
    let queues = Queues::new(30, 10).await;
    let db = ScratchDb::new();
    let env = stack_env(&queues);
    assert!(db.rara(&["migrate"]).status.success());
    let run_id = submit(
        &db,
        "name: again\nsteps:\n  - {name: f, operation: fail, input: {fail_attempts: 1, retryable: false}, max_attempts: 1}\n  - {name: after, operation: noop, depends_on: [f]}\n",
    );
    work(&db, &env, 1);
    let status = json(&db.rara(&["status", &run_id.to_string(), "--json"]));
    assert_eq!(status["status"], "failed");
    assert_eq!(status["steps"][1]["status"], "skipped");
    let step_id = status["steps"][0]["id"].as_str().unwrap().to_owned();

    let retried = db.rara(&["retry", &step_id]);
    assert!(retried.status.success(), "{}", stderr(&retried));
    work(&db, &env, 2);
    let watched = db.rara(&["watch", &run_id.to_string(), "--timeout-seconds", "20"]);
    assert_eq!(watched.status.code(), Some(0), "{}{}", stdout(&watched), stderr(&watched));
    let status = json(&db.rara(&["status", &run_id.to_string(), "--json"]));
    assert_eq!(status["steps"][0]["attempt"], 2);
    assert_eq!(status["steps"][1]["status"], "succeeded");

    let again = db.rara(&["retry", &step_id]);
    assert_eq!(again.status.code(), Some(1), "a succeeded step cannot be retried");
    assert!(stderr(&again).contains("nothing to retry"));
}

#[tokio::test]
async fn dlq_list_shows_reasons_and_redrive_moves_messages_back() {
    let queues = Queues::new(30, 10).await;
    let db = ScratchDb::new();
    let env = stack_env(&queues);
    assert!(db.rara(&["migrate"]).status.success());
    queues.send_raw("definitely not a step message").await;
    let e = run(&db, &env, &["executor", "--until-idle", "--idle-seconds", "2"]);
    assert!(e.status.success(), "{}", stderr(&e));

    let listed = run(&db, &env, &["dlq", "list", "--json"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let listed = json(&listed);
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["reason_code"], "MALFORMED_MESSAGE");
    assert_eq!(listed[0]["body"], "definitely not a step message");
    // Listing leaves the messages where they are.
    assert_eq!(json(&run(&db, &env, &["dlq", "list", "--json"])).as_array().unwrap().len(), 1);

    let redriven = run(&db, &env, &["dlq", "redrive", "--json"]);
    assert!(redriven.status.success(), "{}", stderr(&redriven));
    assert_eq!(json(&redriven)["redriven"], 1);
    assert!(queues.dead_letters().await.is_empty());
    let back = queues
        .client
        .receive_message()
        .queue_url(&queues.url)
        .wait_time_seconds(2)
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default();
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].body.as_deref(), Some("definitely not a step message"));
}

#[test]
fn capabilities_lists_what_a_remote_executor_offers() {
    let server = rara_testkit::python::PythonServer::start();
    let db = ScratchDb::new();
    let out = db.rara(&["capabilities", server.url(), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let list = json(&out);
    let names: Vec<(String, String)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap().to_owned(), c["version"].as_str().unwrap().to_owned()))
        .collect();
    assert!(names.contains(&("text.stats".into(), "1.0.0".into())), "{names:?}");
    assert!(names.contains(&("sleep".into(), "1.0.0".into())));
    let table = db.rara(&["capabilities", server.url()]);
    assert!(stdout(&table).contains("NAME") && stdout(&table).contains("dataset.split"));

    let port = rara_testkit::python::free_port();
    let nobody = db.rara(&["capabilities", &format!("http://127.0.0.1:{port}")]);
    assert_eq!(nobody.status.code(), Some(1));
    assert!(stderr(&nobody).contains("answered no capabilities"), "{}", stderr(&nobody));
}
