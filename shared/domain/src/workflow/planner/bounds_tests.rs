//! Every number and name an author sends is bounded at submit, with the field path and the
//! bound in the problem.

use crate::config::Config;
use crate::workflow::{Error, Format, WorkflowDefinition};

fn problems(text: &str) -> Vec<String> {
    let config = Config::from_lookup("test", |_| None).unwrap();
    match WorkflowDefinition::parse(text, Format::Yaml).unwrap().plan(&config) {
        Err(Error::Invalid(p)) => p.iter().map(ToString::to_string).collect(),
        other => panic!("expected problems, got {other:?}"),
    }
}

fn one_step(fields: &str) -> String {
    format!("name: r\nsteps:\n  - {{name: a, operation: noop, {fields}}}\n")
}

#[test]
fn retry_delays_beyond_a_day_or_not_numbers_of_seconds_are_refused_with_the_bound() {
    for (fields, path) in [
        ("retry: {initial_delay_seconds: 1e16}", "steps[0].retry.initial_delay_seconds: 1e16;"),
        ("retry: {initial_delay_seconds: -1}", "steps[0].retry.initial_delay_seconds: -1;"),
        ("retry: {initial_delay_seconds: .nan}", "steps[0].retry.initial_delay_seconds: NaN;"),
        ("retry: {max_delay_seconds: .inf}", "steps[0].retry.max_delay_seconds: inf;"),
        ("retry: {max_delay_seconds: 86401}", "steps[0].retry.max_delay_seconds: 86401;"),
    ] {
        let p = problems(&one_step(fields));
        assert_eq!(p, vec![format!("{path} must be a number of seconds from 0 to 86400")], "{fields}");
    }
}

#[test]
fn a_retry_multiplier_must_be_finite_and_between_1_and_100() {
    for (value, shown) in [("1e300", "1e300"), (".nan", "NaN"), ("-2", "-2"), ("0.5", "0.5"), ("100.5", "100.5")] {
        let p = problems(&one_step(&format!("retry: {{multiplier: {value}}}")));
        assert_eq!(p, vec![format!("steps[0].retry.multiplier: {shown}; must be a number from 1 to 100")]);
    }
}

#[test]
fn retry_numbers_within_their_bounds_plan() {
    let text = one_step("retry: {initial_delay_seconds: 0, max_delay_seconds: 86400, multiplier: 100}");
    let config = Config::from_lookup("test", |_| None).unwrap();
    let plan = WorkflowDefinition::parse(&text, Format::Yaml).unwrap().plan(&config).unwrap();
    assert_eq!(plan.steps[0].retry.max_delay.as_secs(), 86_400);
    assert_eq!(plan.steps[0].retry.multiplier, 100.0);
}

#[test]
fn a_concurrency_key_too_long_or_with_control_characters_is_refused_at_its_field() {
    let p = problems(&one_step(&format!("concurrency: {{key: {}}}", "k".repeat(300))));
    assert_eq!(p, vec!["steps[0].concurrency.key: 300 bytes; a key is 1 to 200 bytes".to_owned()]);
    let p = problems(&one_step("concurrency: {key: \"tenant\\nx\"}"));
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].starts_with("steps[0].concurrency.key: ") && p[0].contains("control characters"), "{p:?}");
}

#[test]
fn an_operation_name_is_1_to_128_characters_of_a_metric_safe_charset() {
    let bound = "must be 1 to 128 characters of ASCII letters, digits and . _ : -";
    for (name, chars) in
        [("\"text split\"", 10), ("\"text.\\nsplit\"", 11), ("\"\"", 0), (&*"o".repeat(300), 300), ("\"tëxt\"", 4)]
    {
        let p = problems(&format!("name: r\nsteps:\n  - {{name: a, operation: {name}}}\n"));
        assert_eq!(p, vec![format!("steps[0].operation: {bound} (it is {chars} characters)")], "{name}");
    }
    for good in ["text.split", "http.request", "ml:train-v2_x", &"o".repeat(128)] {
        let config = Config::from_lookup("test", |_| None).unwrap();
        let text = format!("name: r\nsteps:\n  - {{name: a, operation: {good}}}\n");
        assert!(WorkflowDefinition::parse(&text, Format::Yaml).unwrap().plan(&config).is_ok(), "{good}");
    }
}
