use super::*;
use crate::config::Config;
use crate::workflow::{Format, WorkflowDefinition};

fn problems(yaml: &str) -> String {
    let definition = WorkflowDefinition::parse(yaml, Format::Yaml).unwrap();
    match definition.plan(&Config::from_lookup("test", |_| None).unwrap()) {
        Ok(_) => String::new(),
        Err(e) => format!("{e:?}"),
    }
}

fn planned(yaml: &str) -> Wait {
    let definition = WorkflowDefinition::parse(yaml, Format::Yaml).unwrap();
    definition.plan(&Config::from_lookup("test", |_| None).unwrap()).unwrap().steps[0].wait.clone().unwrap()
}

#[test]
fn each_kind_plans_with_its_defaults() {
    assert_eq!(
        planned("name: r\nsteps:\n  - {name: t, wait: {seconds: 10}}\n"),
        Wait::Timer { seconds: Some(10), until: None }
    );
    let signal = planned("name: r\nsteps:\n  - {name: a, wait: {signal: approve, timeout_seconds: 60}}\n");
    assert_eq!(
        signal,
        Wait::Signal {
            name: "approve".into(),
            timeout_seconds: Some(60),
            on_timeout: OnTimeout::Fail,
            schema: None,
            accept_early: false
        }
    );
    let event = planned(
        "name: r\ninputs: {id: {type: string, default: d1}}\nsteps:\n  - {name: e, wait: {event: uploaded, key: {$input: /id}}}\n",
    );
    assert_eq!(
        event,
        Wait::Event { name: "uploaded".into(), key: "d1".into(), timeout_seconds: None, on_timeout: OnTimeout::Fail }
    );
    assert_eq!(event.operation(), "wait.event");
}

#[test]
fn a_wait_is_one_kind_with_its_own_fields_only() {
    let both = problems("name: r\nsteps:\n  - {name: a, wait: {seconds: 5, signal: go}}\n");
    assert!(both.contains("steps[0].wait") && both.contains("one of"), "{both}");
    let misplaced = problems("name: r\nsteps:\n  - {name: a, wait: {seconds: 5, timeout_seconds: 3, key: k}}\n");
    assert!(misplaced.contains("steps[0].wait.timeout_seconds"), "{misplaced}");
    assert!(misplaced.contains("steps[0].wait.key"), "{misplaced}");
    let operation = problems("name: r\nsteps:\n  - {name: a, operation: noop, wait: {seconds: 5}}\n");
    assert!(operation.contains("steps[0].operation"), "{operation}");
    let no_key = problems("name: r\nsteps:\n  - {name: a, wait: {event: uploaded}}\n");
    assert!(no_key.contains("steps[0].wait.key"), "{no_key}");
}

#[test]
fn numbers_instants_and_schemas_are_bounded_at_submit() {
    let long = problems(&format!("name: r\nsteps:\n  - {{name: a, wait: {{seconds: {}}}}}\n", MAX_WAIT_SECONDS + 1));
    assert!(long.contains("steps[0].wait.seconds"), "{long}");
    let bad = problems("name: r\nsteps:\n  - {name: a, wait: {until: 'next tuesday'}}\n");
    assert!(bad.contains("steps[0].wait.until") && bad.contains("RFC 3339"), "{bad}");
    let schema = problems("name: r\nsteps:\n  - {name: a, wait: {signal: go, schema: {type: 12}}}\n");
    assert!(schema.contains("steps[0].wait.schema"), "{schema}");
    let missing = problems("name: r\nsteps:\n  - {name: a, wait: {until: {$input: /when}}}\n");
    assert!(missing.contains("steps[0].wait.until"), "{missing}");
}

#[test]
fn a_payload_is_checked_against_the_schema_with_its_path() {
    let schema =
        serde_json::json!({"type": "object", "required": ["approved_by"], "properties": {"n": {"type": "integer"}}});
    assert!(payload_problems(&schema, &serde_json::json!({"approved_by": "ana"})).is_empty());
    let found = payload_problems(&schema, &serde_json::json!({"n": "x"}));
    assert!(found.iter().any(|(path, _)| path == "/n"), "{found:?}");
    assert!(found.iter().any(|(_, why)| why.contains("approved_by")), "{found:?}");
}

#[test]
fn the_stored_form_reads_back_as_the_same_wait() {
    let waits = [
        planned("name: r\nsteps:\n  - {name: t, wait: {until: '2026-12-24T08:00:00Z'}}\n"),
        planned(
            "name: r\nsteps:\n  - {name: a, wait: {signal: go, timeout_seconds: 5, on_timeout: continue, schema: {type: object}, accept_early: true}}\n",
        ),
        planned("name: r\nsteps:\n  - {name: e, wait: {event: up, key: k1}}\n"),
    ];
    for wait in waits {
        let stored = wait.to_json();
        assert_eq!(serde_json::from_value::<Wait>(stored.clone()).unwrap(), wait, "{stored}");
        assert_eq!(stored, serde_json::to_value(&wait).unwrap());
    }
}

#[test]
fn a_delivery_is_bounded_with_the_field_at_fault() {
    let ok = serde_json::json!({"approved_by": "ana"});
    assert_eq!(check_delivery("s1", None, &ok), Ok(()));
    assert_eq!(check_delivery("", None, &ok).unwrap_err().0, "id");
    assert_eq!(check_delivery(&"x".repeat(MAX_ID_LEN + 1), None, &ok).unwrap_err().0, "id");
    assert_eq!(check_delivery("s1", Some(""), &ok).unwrap_err().0, "reject");
    assert_eq!(check_delivery("s1", Some(&"r".repeat(MAX_REASON_LEN + 1)), &ok).unwrap_err().0, "reject");
    let big = serde_json::json!({"blob": "x".repeat(MAX_PAYLOAD_BYTES)});
    assert_eq!(check_delivery("s1", None, &big).unwrap_err().0, "data");
}
