//! `rara submit` and data flow: run inputs from the command line, and references refused at
//! their field path with the invalid-definition exit code.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;

const FLOW: &str = "name: flow
inputs: {date: '2026-12-01'}
steps:
  - {name: fetch, operation: noop}
  - {name: summarise, operation: noop, depends_on: [fetch], input: {text: {$output: fetch, pointer: /body}, date: {$input: /date}, n: {$input: /limits/n}}}
";

#[test]
fn run_inputs_from_the_command_line_override_the_definition_and_are_stored_on_the_run() {
    let db = ScratchDb::new();
    assert!(db.rara(&["migrate"]).status.success());
    let dir = tempdir();
    let file = write(&dir, "flow.yaml", FLOW);

    // `/limits/n` is in no input yet: refused, nothing stored.
    let out = db.rara(&["submit", &file]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(r#"steps[1].input.n: $input "/limits/n" finds nothing in the run's inputs"#),
        "{}",
        stderr(&out)
    );

    let out = db.rara(&["submit", "--json", &file, "--input", "date=2026-12-04", "--input-json", r#"limits={"n": 3}"#]);
    assert!(out.status.success(), "{}", stderr(&out));
    let submitted: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let run_id = submitted["id"].as_str().unwrap().to_owned();
    let status = db.rara(&["status", "--json", &run_id]);
    let run: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(run["inputs"], serde_json::json!({"date": "2026-12-04", "limits": {"n": 3}}));

    for (args, message) in [
        (vec!["--input-json", "limits={n: 3}"], "is not JSON"),
        (vec!["--input", "=3"], "expected KEY=VALUE"),
        (vec!["--input", "date=a", "--input-json", "date=1"], r#"the run input "date" is given twice"#),
    ] {
        let mut all = vec!["submit", file.as_str()];
        all.extend(args);
        let out = db.rara(&all);
        assert_eq!(out.status.code(), Some(2), "{all:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(message), "{all:?}: {}", stderr(&out));
    }
}

#[test]
fn a_reference_to_a_step_that_is_not_a_dependency_is_refused_with_its_path() {
    let db = ScratchDb::new();
    assert!(db.rara(&["migrate"]).status.success());
    let dir = tempdir();
    let file = write(
        &dir,
        "typo.yaml",
        "name: typo\nsteps:\n  - {name: fetch, operation: noop}\n  - {name: summarise, operation: noop, depends_on: [fetch], input: {text: {$output: fech}}}\n",
    );
    let out = db.rara(&["submit", &file]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(r#"steps[1].input.text: $output "fech" is not a dependency of "summarise""#),
        "{}",
        stderr(&out)
    );
}
