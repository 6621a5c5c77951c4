//! `rara signal` and `rara event send` against Postgres and a scheduler pass (`rara scheduler
//! --once` starts the waits): what `rara status` shows while a step waits, a delivery, the same
//! id again, a signal nothing waits for (exit code 9), a payload that fails the schema, an event.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use rara_testkit::Queues;

fn submit(db: &ScratchDb, yaml: &str) -> String {
    let dir = tempdir();
    let out = db.rara(&["submit", &write(&dir, "wf.yaml", yaml)]);
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out).trim().to_owned()
}

const APPROVAL: &str = "name: release
steps:
  - name: approve
    wait: {signal: approve, timeout_seconds: 3600, schema: {type: object, required: [approved_by]}}
  - {name: dataset, wait: {event: dataset.uploaded, key: A}}
";

#[tokio::test]
async fn signals_and_events_complete_waits_from_the_command_line() {
    let queues = Queues::new(30, 10).await;
    let db = ScratchDb::new();
    let env = stack_env(&queues);
    assert!(db.rara(&["migrate"]).status.success());
    let run_id = submit(&db, APPROVAL);
    let pass = db.rara_in(&env, &["scheduler", "--once"]);
    assert!(pass.status.success(), "{}", stderr(&pass));
    let status = db.rara(&["status", &run_id]);
    assert!(stdout(&status).contains("waiting (signal approve, 59 min"), "{}", stdout(&status));

    let invalid = db.rara(&["signal", &run_id, "approve", "--data", "{}"]);
    assert_eq!(invalid.status.code(), Some(2), "{}", stderr(&invalid));
    assert!(stderr(&invalid).contains("approved_by"), "{}", stderr(&invalid));

    let args = ["signal", &run_id, "approve", "--data", r#"{"approved_by":"ana"}"#, "--id", "s1", "--json"];
    let delivered = db.rara(&args);
    assert!(delivered.status.success(), "{}", stderr(&delivered));
    let answer: serde_json::Value = serde_json::from_slice(&delivered.stdout).unwrap();
    assert_eq!(answer["delivery"], "delivered");
    assert_eq!(answer["steps"], serde_json::json!(["approve"]));
    let again = db.rara(&args);
    assert!(stdout(&again).contains("\"duplicate\""), "{}", stdout(&again));
    let late = db.rara(&["signal", &run_id, "approve", "--reject", "too late"]);
    assert_eq!(late.status.code(), Some(9), "{}", stderr(&late));
    assert!(stderr(&late).contains("approve is succeeded"), "{}", stderr(&late));

    let sent = db.rara(&["event", "send", "dataset.uploaded", "--key", "A", "--data", r#"{"uri":"s3://a"}"#]);
    assert!(sent.status.success(), "{}", stderr(&sent));
    assert!(stdout(&sent).contains("completed 1 waiting step"), "{}", stdout(&sent));
    let done = db.rara(&["status", &run_id, "--json"]);
    let run: serde_json::Value = serde_json::from_slice(&done.stdout).unwrap();
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["steps"][1]["output"], serde_json::json!({"uri": "s3://a"}));
}

/// `rara rerun` from the command line, on a run finished by signals alone (no executor): the
/// new run carries the first step over and waits again at the second; `status` links both
/// runs; no such step exits 11, an input the run does not have exits 2. Then `rara replay`.
#[tokio::test]
async fn a_rerun_carries_what_came_before_and_runs_the_step_again() {
    let queues = Queues::new(30, 10).await;
    let db = ScratchDb::new();
    let env = stack_env(&queues);
    assert!(db.rara(&["migrate"]).status.success());
    let yaml = "name: gates\ninputs: {n: {type: integer}}\nsteps:\n  - {name: a, wait: {signal: go}}\n  \
                - {name: b, depends_on: [a], wait: {signal: approve}}\n";
    let dir = tempdir();
    let out = db.rara(&["submit", &write(&dir, "wf.yaml", yaml), "--input", "n=1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run_id = stdout(&out).trim().to_owned();
    for (signal, extra) in [("go", None), ("approve", Some("not yet"))] {
        assert!(db.rara_in(&env, &["scheduler", "--once"]).status.success());
        let mut args = vec!["signal", &run_id, signal];
        args.extend(extra.iter().flat_map(|reason| ["--reject", *reason]));
        let sent = db.rara(&args);
        assert!(sent.status.success(), "{}", stderr(&sent));
    }
    assert!(stdout(&db.rara(&["status", &run_id])).contains(&format!("run {run_id}  gates  failed")));

    let refused = db.rara(&["rerun", &run_id, "--from", "zz"]);
    assert_eq!(refused.status.code(), Some(11), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("no step \"zz\" (its steps: a, b)"), "{}", stderr(&refused));
    let usage = db.rara(&["rerun", &run_id, "--from", "b", "--input", "m=2"]);
    assert_eq!(usage.status.code(), Some(2), "{}", stderr(&usage));
    assert!(stderr(&usage).contains("inputs.m: the run has no input \"m\""), "{}", stderr(&usage));

    let made = db.rara(&["rerun", &run_id, "--from", "b", "--input", "n=2"]);
    assert!(made.status.success(), "{}", stderr(&made));
    let rerun_id = stdout(&made).trim().to_owned();
    assert!(stderr(&made).contains("runs again b; carried over a"), "{}", stderr(&made));
    assert!(db.rara_in(&env, &["scheduler", "--once"]).status.success());
    let shown = stdout(&db.rara(&["status", &rerun_id]));
    assert!(shown.contains(&format!("rerun of {run_id}")), "{shown}");
    assert!(shown.contains("succeeded (carried over)") && shown.contains("waiting (signal approve"), "{shown}");
    assert!(shown.contains(r#"inputs {"n":2}"#), "{shown}");
    assert!(stdout(&db.rara(&["status", &run_id])).contains(&format!("reruns {rerun_id}")));

    // A replay of the failed runs: counted first, made once.
    let counted = db.rara(&["replay", "--status", "failed", "--name", "gates", "--since", "2026-01-01", "--dry-run"]);
    assert!(counted.status.success(), "{}", stderr(&counted));
    assert!(stdout(&counted).contains("1 runs match; 1 would be replayed (0 replayed before)"), "{}", stdout(&counted));
    let replayed = db.rara(&["replay", "--status", "failed", "--from-failed"]);
    assert!(stdout(&replayed).contains("1 runs match; 1 replayed now (0 replayed before)"), "{}", stdout(&replayed));
    let again = db.rara(&["replay", "--status", "failed", "--from-failed"]);
    assert!(stdout(&again).contains("0 replayed now (1 replayed before)"), "{}", stdout(&again));
    let bad = db.rara(&["replay", "--status", "running"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
}
