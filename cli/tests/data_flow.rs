//! `rara submit` and data flow: run inputs from the command line checked against their
//! declarations, the idempotency key with other inputs, and references refused at their field
//! path with the invalid-definition exit code.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;

const FLOW: &str = "name: flow
inputs:
  date: {type: string}
  top: {type: integer, default: 5}
  tags: {type: array, default: []}
  limits: {type: object, default: {n: 1}}
output: {date: {$input: /date}, n: {$output: summarise, pointer: /n}}
steps:
  - {name: fetch, operation: noop}
  - {name: summarise, operation: noop, depends_on: [fetch], input: {text: {$output: fetch, pointer: /body}, date: {$input: /date}, n: {$input: /limits/n}, top: {$input: /top}}}
";

#[test]
fn run_inputs_are_checked_against_their_declarations_and_stored_resolved() {
    let db = ScratchDb::new();
    assert!(db.rara(&["migrate"]).status.success());
    let dir = tempdir();
    let file = write(&dir, "flow.yaml", FLOW);
    let params = write(&dir, "params.json", r#"{"limits": {"n": 3}, "tags": ["x"]}"#);

    // Each bad input is refused at its path (exit 4), its value never echoed, nothing stored.
    for (args, message) in [
        (vec![], "inputs.date: required (it has no default) and not given: rara submit --input date=VALUE"),
        (vec!["--input", "date=d", "--input", "top=tenfold"], "inputs.top: expected integer, got a string"),
        (
            vec!["--input", "date=d", "--input", "top=2.5"],
            "inputs.top: expected integer, got a number with a fractional part",
        ),
        (
            vec!["--input", "date=d", "--input", "colour=crimson"],
            "inputs.colour: not a declared input (inputs: declares date, limits, tags, top)",
        ),
        (
            vec!["--input", "date=d", "--input-json", "limits={}"],
            r#"steps[1].input.n: $input "/limits/n" finds nothing in the run's inputs"#,
        ),
    ] {
        let mut all = vec!["submit", file.as_str()];
        all.extend(args);
        let out = db.rara(&all);
        assert_eq!(out.status.code(), Some(4), "{all:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(message), "{all:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("tenfold") && !stderr(&out).contains("crimson"), "{}", stderr(&out));
    }
    let listed = db.rara(&["list", "--json"]);
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&listed.stdout).unwrap(), serde_json::json!([]));

    // `--input` is JSON when it parses, else a string; an input declared `string` keeps its text;
    // `--input-file` gives an object of inputs; what is not given takes its default.
    let out =
        db.rara(&["submit", "--json", &file, "--input", "date=20261204", "--input", "top=3", "--input-file", &params]);
    assert!(out.status.success(), "{}", stderr(&out));
    let submitted: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let run_id = submitted["id"].as_str().unwrap().to_owned();
    let status = db.rara(&["status", "--json", &run_id]);
    let run: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let stored = serde_json::json!({"date": "20261204", "top": 3, "tags": ["x"], "limits": {"n": 3}});
    assert_eq!(run["inputs"], stored);
    assert_eq!(run.get("output"), None, "the output is resolved once the run succeeded");
    let text = stdout(&db.rara(&["status", &run_id]));
    assert!(text.contains(&format!("inputs {stored}")), "{text}");

    let out =
        db.rara(&["submit", "--json", &file, "--input", "date=d", "--input", r#"tags=["a", 1]"#, "--input", "top=7"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run_id = serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["id"].as_str().unwrap().to_owned();
    let run: serde_json::Value = serde_json::from_slice(&db.rara(&["status", "--json", &run_id]).stdout).unwrap();
    assert_eq!(run["inputs"], serde_json::json!({"date": "d", "top": 7, "tags": ["a", 1], "limits": {"n": 1}}));

    let not_an_object = write(&dir, "list.json", "[1]");
    for (args, message) in [
        (vec!["--input-json", "limits={n: 3}"], "is not JSON"),
        (vec!["--input", "=3"], "expected KEY=VALUE"),
        (vec!["--input", "date=a", "--input-json", "date=1"], r#"the run input "date" is given twice"#),
        (vec!["--input-file", params.as_str(), "--input", "tags=[]"], r#"the run input "tags" is given twice"#),
        (vec!["--input-file", not_an_object.as_str()], "must hold a JSON object of run inputs"),
    ] {
        let mut all = vec!["submit", file.as_str()];
        all.extend(args);
        let out = db.rara(&all);
        assert_eq!(out.status.code(), Some(2), "{all:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(message), "{all:?}: {}", stderr(&out));
    }
}

#[test]
fn a_plain_value_where_a_declaration_belongs_is_refused_with_the_declared_form() {
    let db = ScratchDb::new();
    assert!(db.rara(&["migrate"]).status.success());
    let dir = tempdir();
    let file =
        write(&dir, "old.yaml", "name: old\ninputs: {date: '2026-12-01'}\nsteps: [{name: a, operation: noop}]\n");
    let out = db.rara(&["submit", &file]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        stderr(&out)
            .contains("inputs.date: a run input is declared, not given a value here: declare it as {type: string}"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_same_idempotency_key_with_other_inputs_is_refused_and_creates_nothing() {
    let db = ScratchDb::new();
    assert!(db.rara(&["migrate"]).status.success());
    let dir = tempdir();
    let file = write(
        &dir,
        "nightly.yaml",
        "name: nightly\nidempotency_key: nightly-2026-12-04\ninputs: {date: {type: string}}\nsteps: [{name: a, operation: noop}]\n",
    );
    let submit = |date: &str| db.rara(&["submit", "--json", &file, "--input", &format!("date={date}")]);
    let first = submit("2026-12-04");
    assert!(first.status.success(), "{}", stderr(&first));
    let first: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    let again = submit("2026-12-04");
    let again: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!((&again["id"], &again["created"]), (&first["id"], &serde_json::json!(false)));

    let other = submit("2026-12-05");
    assert_eq!(other.status.code(), Some(8), "{}", stderr(&other));
    let id = first["id"].as_str().unwrap();
    assert!(
        stderr(&other).contains(&format!(
            r#"idempotency key "nightly-2026-12-04" names run {id}, submitted with different inputs; nothing was submitted"#
        )),
        "{}",
        stderr(&other)
    );
    assert!(!stderr(&other).contains("2026-12-05"), "{}", stderr(&other));
    let listed: serde_json::Value = serde_json::from_slice(&db.rara(&["list", "--json"]).stdout).unwrap();
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
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
