//! The `rara` binary against a real Postgres: migrate, submit, status, and the exit codes
//! and messages scripts rely on.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;

use common::*;
use uuid::Uuid;

#[test]
fn migrate_submit_and_status_round_trip() {
    let db = ScratchDb::new();
    let first = db.rara(&["migrate"]);
    assert!(first.status.success(), "{}", stderr(&first));
    assert!(stdout(&first).contains("created the database"));
    let second = db.rara(&["migrate"]);
    assert!(second.status.success() && stdout(&second).contains("up to date"), "migrate is idempotent");

    let dir = tempdir();
    let file = write(
        &dir,
        "wf.yaml",
        "name: demo\nsteps:\n  - {name: a, operation: noop}\n  - {name: b, operation: sleep, input: {seconds: 1}, depends_on: [a], max_attempts: 2}\n",
    );
    let submitted = db.rara(&["submit", &file]);
    assert!(submitted.status.success(), "{}", stderr(&submitted));
    let run_id: Uuid = stdout(&submitted).trim().parse().expect("submit prints the run id");

    let json = db.rara(&["submit", "--json", &file]);
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).expect("--json prints JSON");
    assert!(value["id"].as_str().is_some_and(|id| id != run_id.to_string()), "a second run without key");

    let status = db.rara(&["status", &run_id.to_string(), "--json"]);
    assert!(status.status.success(), "{}", stderr(&status));
    let run: serde_json::Value = serde_json::from_slice(&status.stdout).expect("status --json is JSON");
    assert_eq!(run["id"], run_id.to_string());
    assert_eq!(run["status"], "running");
    let steps = run["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[1]["name"], "b");
    assert_eq!(steps[1]["operation"], "sleep");
    assert_eq!(steps[1]["status"], "pending");
    assert_eq!(steps[1]["attempt"], 0);
    assert_eq!(steps[1]["max_attempts"], 2);
    assert_eq!(steps[1]["depends_on"], serde_json::json!(["a"]));
    for field in ["error", "progress", "artifacts", "attempts"] {
        assert!(steps[1].get(field).is_some(), "step has {field}");
    }

    let table = db.rara(&["status", &run_id.to_string()]);
    let text = stdout(&table);
    assert!(text.contains("STEP") && text.contains("sleep") && text.contains("0/2"), "{text}");
}

#[test]
fn idempotency_key_returns_the_same_run() {
    let db = ScratchDb::new();
    assert!(db.rara(&["migrate"]).status.success());
    let dir = tempdir();
    let file =
        write(&dir, "wf.json", r#"{"name":"once","idempotency_key":"k-1","steps":[{"name":"a","operation":"noop"}]}"#);
    let a = db.rara(&["submit", "--json", &file]);
    let b = db.rara(&["submit", "--json", &file]);
    let a: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    let b: serde_json::Value = serde_json::from_slice(&b.stdout).unwrap();
    assert_eq!(a["id"], b["id"]);
    assert_eq!((a["created"].as_bool(), b["created"].as_bool()), (Some(true), Some(false)));
}

#[test]
fn missing_run_and_bad_definitions_fail_with_clear_messages_and_codes() {
    let db = ScratchDb::new();
    assert!(db.rara(&["migrate"]).status.success());
    let missing = db.rara(&["status", &Uuid::new_v4().to_string()]);
    assert_eq!(missing.status.code(), Some(3));
    assert!(stderr(&missing).contains("not found"), "{}", stderr(&missing));

    let dir = tempdir();
    let bad = write(&dir, "bad.yaml", "name: x\nsteps:\n  - {name: a, operation: noop, depends_on: [ghost]}\n");
    let out = db.rara(&["submit", &bad]);
    assert_eq!(out.status.code(), Some(4));
    assert!(stderr(&out).contains("steps[0].depends_on[0]: unknown step \"ghost\""), "{}", stderr(&out));

    let typo = write(&dir, "typo.json", r#"{"name":"x","steps":[{"name":"a","operaton":"noop"}]}"#);
    let out = db.rara(&["submit", &typo]);
    assert_eq!(out.status.code(), Some(4));
    assert!(stderr(&out).contains("operaton"), "{}", stderr(&out));

    let nothing = db.rara(&["submit", "/nonexistent/wf.yaml"]);
    assert_eq!(nothing.status.code(), Some(1));
    assert!(stderr(&nothing).contains("cannot read /nonexistent/wf.yaml"));

    let steps: String = Command::new("psql")
        .args([&db.url, "-tAc", "SELECT count(*) FROM steps"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    assert_eq!(steps, "0", "rejected definitions store nothing");
}

#[test]
fn an_unknown_status_is_a_usage_error_not_a_filter() {
    let db = ScratchDb::new();
    let out = db.rara(&["list", "--status", "runing"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let message = stderr(&out);
    assert!(message.contains("runing") && message.contains("possible values: running"), "{message}");
}

#[test]
fn the_operator_binary_lists_operator_commands_and_no_benchmark() {
    let db = ScratchDb::new();
    let help = db.rara(&["--help"]);
    assert!(help.status.success(), "{}", stderr(&help));
    let text = stdout(&help);
    for command in ["migrate", "submit", "status", "watch", "list", "cancel", "retry", "dlq", "scheduler", "executor"] {
        assert!(text.contains(&format!("  {command} ")), "`rara --help` lists {command}:\n{text}");
    }
    assert!(!text.to_lowercase().contains("bench"), "{text}");
    assert_eq!(db.rara(&["bench"]).status.code(), Some(2), "`rara bench` is gone (it is `rara-bench`)");
}

#[test]
fn a_database_that_cannot_be_reached_says_why_and_what_to_do() {
    let run = Uuid::new_v4().to_string();
    let rara = |url: &str| {
        Command::new(env!("CARGO_BIN_EXE_rara"))
            .args(["status", &run])
            .env("DATABASE_URL", url)
            .env("RARA_LOG", "warn")
            .output()
            .expect("run rara")
    };
    // Nothing listens on port 1.
    let down = rara("postgres://postgres:hunter2@127.0.0.1:1/rara");
    assert_eq!(down.status.code(), Some(7), "{}", stderr(&down));
    let text = stderr(&down);
    assert!(text.contains("nothing accepts connections at 127.0.0.1:1") && text.contains("start Postgres"), "{text}");
    assert!(!text.contains("hunter2"), "the password is never printed: {text}");
    // A server that is up, a database that is not there.
    let missing = rara(&format!("postgres://postgres@127.0.0.1:5432/rara_missing_{}", Uuid::new_v4().simple()));
    assert_eq!(missing.status.code(), Some(7), "{}", stderr(&missing));
    assert!(
        stderr(&missing).contains("does not exist") && stderr(&missing).contains("rara migrate"),
        "{}",
        stderr(&missing)
    );
}

#[test]
fn submit_refuses_an_in_process_step_that_cannot_fit_one_invocation_and_accepts_a_remote_one() {
    let db = ScratchDb::new();
    assert!(db.rara(&["migrate"]).status.success());
    let dir = tempdir();
    // The built-in `sleep` runs inside one invocation: 60 s function timeout less 2 s.
    let built_in =
        write(&dir, "nap.yaml", "name: nap\nsteps:\n  - {name: nap, operation: sleep, timeout_seconds: 180}\n");
    let out = db.rara(&["submit", &built_in]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("steps[0].timeout_seconds: 180; \"sleep\" runs in-process"), "{err}");
    assert!(err.contains("at most 58"), "{err}");
    // Pinned to the Python executor's `sleep` 1.0.0: remote, it detaches.
    let remote = write(
        &dir,
        "train.yaml",
        "name: train\nsteps:\n  - {name: train, operation: sleep, version: \"1.0.0\", timeout_seconds: 180}\n",
    );
    let out = db.rara(&["submit", &remote]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn migrate_roles_lists_the_roles_and_how_each_function_gets_a_login() {
    let db = ScratchDb::new();
    let out = db.rara(&["migrate", "--roles"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for role in ["rara_owner", "rara_runtime", "rara_console"] {
        assert!(text.contains(role), "{role}: {text}");
    }
    assert!(text.contains("CREATE ROLE rara_api LOGIN PASSWORD"), "{text}");
    let json = db.rara(&["migrate", "--roles", "--json"]);
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).expect("--json prints JSON");
    assert_eq!(value["roles"][1]["role"], "rara_runtime");
    assert_eq!(value["roles"][1]["exists"], true);
    assert_eq!(value["logins"].as_array().map(Vec::len), Some(3));
}
