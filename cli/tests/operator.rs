//! The operator commands against a live stack (Postgres, LocalStack's SQS, the `rara`
//! runners): queue create, list, cancel, watch, retry, dlq list, purge and redrive.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use rara_testkit::Queues;
use uuid::Uuid;

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", stdout(o), stderr(o)))
}

/// Rounds of one scheduler pass then the executor until the queue stays empty: one
/// round per level of the workflow's dependency graph.
fn work(db: &ScratchDb, env: &[(&'static str, String)], rounds: usize) {
    for _ in 0..rounds {
        let s = db.rara_in(env, &["scheduler", "--once"]);
        assert!(s.status.success(), "{}", stderr(&s));
        let e = db.rara_in(env, &["executor", "--until-idle", "--idle-seconds", "2"]);
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
    let out = db.rara_in(&env, &["queue", "create", "--name", &name, "--json"]);
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
    let text = db.rara_in(&env, &["queue", "create", "--name", &name]);
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

    let cancelled = db.rara_in(&env, &["cancel", &second.to_string(), "--json"]);
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
    let e = db.rara_in(&env, &["executor", "--until-idle", "--idle-seconds", "2"]);
    assert!(e.status.success(), "{}", stderr(&e));

    let listed = db.rara_in(&env, &["dlq", "list", "--json"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let listed = json(&listed);
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["reason_code"], "MALFORMED_MESSAGE");
    assert_eq!(listed[0]["body"], "definitely not a step message");
    // Listing leaves the messages where they are.
    assert_eq!(json(&db.rara_in(&env, &["dlq", "list", "--json"])).as_array().unwrap().len(), 1);

    let redriven = db.rara_in(&env, &["dlq", "redrive", "--json"]);
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

/// Moves every message on the step queue to the DLQ through SQS redrive: received without
/// being deleted until the queue (visibility 1 s, `maxReceiveCount` 1) holds none.
async fn redrive_all_to_dlq(queues: &Queues, count: usize) {
    let mut received = std::collections::HashSet::new();
    for _ in 0..20 {
        let messages = queues
            .client
            .receive_message()
            .queue_url(&queues.url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap()
            .messages
            .unwrap_or_default();
        if messages.is_empty() && received.len() == count {
            return;
        }
        received.extend(messages.into_iter().filter_map(|m| m.message_id));
        tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    }
    panic!("SQS did not move the {count} messages to the DLQ");
}

#[tokio::test]
async fn dlq_entries_moved_by_sqs_redrive_are_classified_purged_when_stale_and_redriven_when_live() {
    use rara_queue::Queue;
    let queues = Queues::new(1, 1).await;
    let db = ScratchDb::new();
    let env = stack_env(&queues);
    assert!(db.rara(&["migrate"]).status.success());
    let run_id = submit(
        &db,
        "name: dlq\nsteps:\n  - {name: done, operation: noop}\n  - {name: again, operation: noop}\n  - {name: back, operation: noop}\n  - {name: waits, operation: noop}\n",
    );
    let status = json(&db.rara(&["status", &run_id.to_string(), "--json"]));
    let id_of = |name: &str| -> Uuid {
        let steps = status["steps"].as_array().unwrap();
        steps.iter().find(|s| s["name"] == name).unwrap()["id"].as_str().unwrap().parse().unwrap()
    };
    let store = rara_store::Store::connect(&db.url, 2).await.unwrap();
    let lease = std::time::Duration::from_secs(600);
    let leased = store.lease_due("test-scheduler", 10, lease).await.unwrap();
    assert_eq!(leased.len(), 4);
    let token_of = |step: Uuid| leased.iter().find(|l| l.step_id == step).unwrap().lease_token;
    let body = |step: Uuid, token: Uuid| format!(r#"{{"v":1,"step_id":"{step}","lease_token":"{token}"}}"#);
    for l in &leased {
        queues.send_raw(&body(l.step_id, l.lease_token)).await;
    }
    redrive_all_to_dlq(&queues, 4).await;

    // What became of each step since: finished, leased again, handed back, still waiting.
    let (done, again, back, waits) = (id_of("done"), id_of("again"), id_of("back"), id_of("waits"));
    assert!(store.cancel_step(done, "an operator cancelled it").await.unwrap());
    assert_eq!(store.release(&[(again, token_of(again))]).await.unwrap(), 1);
    let released = store.lease_due("test-scheduler", 10, lease).await.unwrap();
    assert_eq!(released.iter().map(|l| l.step_id).collect::<Vec<_>>(), vec![again]);
    assert_eq!(store.release(&[(back, token_of(back))]).await.unwrap(), 1);
    // Beside them: rara's own dead-letter with its reason, and a message for no known step.
    queues.queue().dead_letter("oops", "MALFORMED_MESSAGE", "not JSON").await.unwrap();
    let stranger = body(Uuid::new_v4(), Uuid::new_v4());
    queues.client.send_message().queue_url(&queues.dlq_url).message_body(&stranger).send().await.unwrap();

    let listed = db.rara_in(&env, &["--json", "dlq", "list"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let listed = json(&listed);
    let entry = |body: &str| -> (String, String) {
        let entries = listed.as_array().unwrap();
        let e = entries.iter().find(|e| e["body"] == body).unwrap_or_else(|| panic!("no entry {body}: {listed}"));
        (e["state"].as_str().unwrap().to_owned(), e["classification"].as_str().unwrap().to_owned())
    };
    assert_eq!(listed.as_array().unwrap().len(), 6, "{listed}");
    let (state, why) = entry(&body(done, token_of(done)));
    assert_eq!(state, "stale");
    assert!(why.starts_with("stale: step cancelled at 20") && why.ends_with(" UTC"), "{why}");
    assert_eq!(
        entry(&body(again, token_of(again))),
        ("stale".into(), "stale: the step was leased again (new message sent)".into())
    );
    assert_eq!(
        entry(&body(back, token_of(back))),
        ("stale".into(), "stale: step handed back; it will be leased again".into())
    );
    assert_eq!(
        entry(&body(waits, token_of(waits))),
        ("live".into(), "live: the step still waits for this message (redrive it)".into())
    );
    assert_eq!(entry("oops"), ("rejected".into(), "MALFORMED_MESSAGE: not JSON".into()));
    assert_eq!(entry(&stranger), ("unknown".into(), "unknown step".into()));
    let table = db.rara_in(&env, &["dlq", "list"]);
    assert!(stdout(&table).contains("STATE") && stdout(&table).contains("stale: step cancelled at"));

    let refused = db.rara_in(&env, &["dlq", "purge"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(stderr(&refused).contains("purge needs --stale"), "{}", stderr(&refused));
    let purged = db.rara_in(&env, &["dlq", "purge", "--stale"]);
    assert!(purged.status.success(), "{}", stderr(&purged));
    assert!(stdout(&purged).contains("removed 3 stale message(s)"), "{}", stdout(&purged));
    let left = json(&db.rara_in(&env, &["--json", "dlq", "list"]));
    let mut states: Vec<&str> = left.as_array().unwrap().iter().map(|e| e["state"].as_str().unwrap()).collect();
    states.sort_unstable();
    assert_eq!(states, ["live", "rejected", "unknown"]);

    let redriven = db.rara_in(&env, &["--json", "dlq", "redrive"]);
    assert!(redriven.status.success(), "{}", stderr(&redriven));
    let redriven = json(&redriven);
    assert_eq!(redriven["redriven"], 2, "the live one and rara's own dead-letter: {redriven}");
    assert_eq!(redriven["skipped"]["unknown"], 1);
    let left = json(&db.rara_in(&env, &["--json", "dlq", "list"]));
    assert_eq!(left.as_array().unwrap().len(), 1);
    assert_eq!(left[0]["body"], stranger.as_str());
    let mut back_on_queue: Vec<String> = queues.drain(&queues.url).await.into_iter().filter_map(|m| m.body).collect();
    back_on_queue.sort();
    back_on_queue.dedup();
    let mut expected = vec![body(waits, token_of(waits)), "oops".to_owned()];
    expected.sort();
    assert_eq!(back_on_queue, expected);
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
    assert!(list.as_array().unwrap().iter().all(|c| c["detachable"] == true), "the Python executor detaches: {list}");
    let sleep = list.as_array().unwrap().iter().find(|c| c["name"] == "sleep").unwrap();
    assert!(sleep["input_schema"].is_object(), "the input schema, as JSON: {sleep}");
    assert_eq!(sleep["serving"], true, "its health service says SERVING: {sleep}");
    let table = db.rara(&["capabilities", server.url()]);
    assert!(stdout(&table).contains("NAME") && stdout(&table).contains("dataset.split"));
    assert!(stdout(&table).contains("LONG STEPS"), "{}", stdout(&table));

    let port = rara_testkit::python::free_port();
    let nobody = db.rara(&["capabilities", &format!("http://127.0.0.1:{port}")]);
    assert_eq!(nobody.status.code(), Some(1));
    assert!(stderr(&nobody).contains("answered no capabilities"), "{}", stderr(&nobody));
}

#[tokio::test]
async fn a_map_steps_children_are_grouped_under_it_in_status_and_watch() {
    let queues = Queues::new(30, 10).await;
    let db = ScratchDb::new();
    let env = stack_env(&queues);
    assert!(db.rara(&["migrate"]).status.success());
    let items: Vec<u32> = (0..12).collect();
    let run_id = submit(
        &db,
        &format!(
            "name: wide\ninputs: {{items: {{type: array, default: {items:?}}}}}\nsteps:\n  - {{name: each, operation: fail, for_each: {{$input: /items}}, max_attempts: 1, input: {{fail_attempts: {{$item: ''}}, retryable: false}}}}\n"
        ),
    );
    // Expand, run the twelve children (only `each[0]` succeeds: it fails 0 attempts).
    work(&db, &env, 2);
    let status = json(&db.rara(&["status", &run_id.to_string(), "--json"]));
    assert_eq!(status["status"], "failed");
    let steps = status["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 13, "the map step, then its children in element order");
    assert_eq!((steps[0]["name"].as_str(), steps[0]["map_size"].as_i64()), (Some("each"), Some(12)));
    for (i, child) in steps[1..].iter().enumerate() {
        assert_eq!(child["name"], format!("each[{i}]"));
        assert_eq!((child["parent"].as_str(), child["map_index"].as_u64()), (Some("each"), Some(i as u64)));
        assert_eq!(child["operation"], "fail");
        assert_eq!(child["status"], if i == 0 { "succeeded" } else { "failed" });
    }

    // People see the children under their map step: those that did not succeed (at most
    // ten), and a count of all.
    let table = stdout(&db.rara(&["status", &run_id.to_string()]));
    assert!(table.contains("  each[1] "), "{table}");
    assert!(!table.contains("  each[0] "), "a succeeded child is counted, not listed, in a big map: {table}");
    assert!(table.contains("12 children (2 not listed)"), "{table}");
    assert!(table.contains("1 succeeded, 11 failed"), "{table}");
    let watched = db.rara(&["watch", &run_id.to_string(), "--timeout-seconds", "5"]);
    assert_eq!(watched.status.code(), Some(5));
    // The change lines (the final table follows them).
    let out = stdout(&watched);
    let lines: Vec<&str> = out.lines().take_while(|l| !l.starts_with("run ")).collect();
    assert!(lines.iter().any(|l| l.contains("12 children: 1 succeeded, 11 failed")), "{out}");
    assert!(!lines.iter().any(|l| l.contains("each[3]")), "children are grouped on their map's line: {out}");
    assert_eq!(steps[0]["depends_on"], serde_json::json!([]), "what the definition declares, not the children");
}
