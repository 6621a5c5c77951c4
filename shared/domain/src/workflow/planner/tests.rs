use proptest::prelude::*;

use crate::config::Config;
use crate::workflow::definition::empty_object;
use crate::workflow::problem::testing::chain;
use crate::workflow::{Error, Format, MAX_MAP_ITEMS, StepDefinition, WorkflowDefinition};

fn config() -> Config {
    Config::from_lookup("test", |_| None).unwrap()
}

fn problems(text: &str) -> Vec<String> {
    match WorkflowDefinition::parse(text, Format::Yaml).unwrap().plan(&config()) {
        Err(Error::Invalid(p)) => p.iter().map(ToString::to_string).collect(),
        other => panic!("expected problems, got {other:?}"),
    }
}

#[test]
fn yaml_and_json_give_the_same_plan() {
    let yaml = "name: r\nsteps:\n  - {name: a, operation: noop}\n  - {name: b, operation: noop, depends_on: [a], max_attempts: 2}\n";
    let json = r#"{"name":"r","steps":[{"name":"a","operation":"noop"},{"name":"b","operation":"noop","depends_on":["a"],"max_attempts":2}]}"#;
    let a = WorkflowDefinition::parse(yaml, Format::Yaml).unwrap().plan(&config()).unwrap();
    let b = WorkflowDefinition::parse(json, Format::Json).unwrap().plan(&config()).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.steps[1].depends_on, vec![0]);
    assert_eq!(a.steps[1].retry.max_attempts, 2);
    assert_eq!(a.steps[0].retry.max_attempts, config().default_retry.max_attempts);
}

#[test]
fn an_in_process_step_must_fit_one_invocation_and_a_remote_one_may_run_a_day() {
    let yaml = "name: r\nsteps:\n  - {name: nap, operation: sleep, timeout_seconds: 180}\n  - {name: train, operation: sleep, version: \"1.0.0\", timeout_seconds: 86400}\n";
    let definition = WorkflowDefinition::parse(yaml, Format::Yaml).unwrap();
    // As routing decides: the built-in `sleep` answers to version "1" or none.
    let in_process = |op: &str, version: Option<&str>| op == "sleep" && version.is_none_or(|v| v == "1");
    let problems: Vec<String> = match definition.plan_for(&config(), &Default::default(), in_process) {
        Err(Error::Invalid(p)) => p.iter().map(ToString::to_string).collect(),
        other => panic!("expected problems, got {other:?}"),
    };
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].starts_with("steps[0].timeout_seconds: 180; \"sleep\" runs in-process"), "{problems:?}");
    assert!(problems[0].contains("at most 58"), "{problems:?}");
    // Without knowing what runs in-process, both are accepted (a remote step may detach).
    assert!(definition.plan(&config()).is_ok());
}

#[test]
fn problems_point_to_the_field() {
    let p = problems(
        "name: r\nsteps:\n  - {name: a, operation: noop}\n  - {name: a, operation: noop, depends_on: [zz]}\n  - {name: c, operation: noop, max_attempts: 99}\n",
    );
    assert!(p.iter().any(|l| l.starts_with("steps[1].name: duplicate step name")), "{p:?}");
    assert!(p.iter().any(|l| l == "steps[1].depends_on[0]: unknown step \"zz\""), "{p:?}");
    assert!(p.iter().any(|l| l.starts_with("steps[2].max_attempts: 99")), "{p:?}");
}

#[test]
fn cycles_are_named() {
    let p = problems(
        "name: r\nsteps:\n  - {name: a, operation: noop, depends_on: [c]}\n  - {name: b, operation: noop, depends_on: [a]}\n  - {name: c, operation: noop, depends_on: [b]}\n",
    );
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].contains("dependency cycle: a -> c -> b -> a"), "{p:?}");
}

#[test]
fn oversized_input_is_refused() {
    let mut c = config();
    c.max_input_bytes = 10;
    let def = WorkflowDefinition::parse(
        r#"{"name":"r","steps":[{"name":"a","operation":"x","input":{"k":"a long value"}}]}"#,
        Format::Json,
    )
    .unwrap();
    let err = def.plan(&c).unwrap_err().to_string();
    assert!(err.contains("steps[0].input") && err.contains("RARA_MAX_INPUT_BYTES"), "{err}");
}

#[test]
fn embedded_secrets_are_refused_at_their_field_without_echoing_them() {
    let p = problems(concat!(
        "name: r\nsteps:\n  - {name: a, operation: noop}\n",
        "  - {name: b, operation: http.request, input: {url: 'https://x', headers: {authorization: 'Bearer zz9-top'}}}\n",
        "  - {name: c, operation: noop, input: {keys: ['AKIAIOSFODNN7EXAMPLE'], db: {password: hunter2}}}\n",
    ));
    assert!(
        p.contains(
            &r#"steps[1].input.headers.authorization: looks like a secret (a bearer token); reference it instead: {"$secret": "name"}"#
                .to_owned()
        ),
        "{p:?}"
    );
    assert!(
        p.iter().any(|l| l.starts_with("steps[2].input.keys[0]: looks like a secret (an AWS access key id)")),
        "{p:?}"
    );
    assert!(p.iter().any(|l| l.starts_with("steps[2].input.db.password: looks like a secret (a password)")), "{p:?}");
    let all = p.join("\n");
    for value in ["zz9-top", "AKIAIOSFODNN7EXAMPLE", "hunter2"] {
        assert!(!all.contains(value), "{all}");
    }
}

#[test]
fn secret_references_plan_and_are_kept_as_references() {
    let yaml = "name: r\nsteps:\n  - {name: a, operation: http.request, input: {url: 'https://x', headers: {authorization: {$secret: api}}}}\n";
    let plan = WorkflowDefinition::parse(yaml, Format::Yaml).unwrap().plan(&config()).unwrap();
    assert_eq!(plan.steps[0].input["headers"]["authorization"], serde_json::json!({"$secret": "api"}));
    let p = problems("name: r\nsteps:\n  - {name: a, operation: noop, input: {k: {$secret: api, extra: 1}}}\n");
    assert!(p.iter().any(|l| l.starts_with("steps[0].input.k: malformed secret reference")), "{p:?}");
}

#[test]
fn references_name_only_dependencies_direct_or_transitive() {
    let yaml = concat!(
        "name: r\ninputs: {date: {type: string, default: '2026-12-04'}, who: {type: object, default: {name: ada}}}\nsteps:\n",
        "  - {name: fetch, operation: noop}\n",
        "  - {name: summarise, operation: noop, depends_on: [fetch], input: {text: {$output: fech, pointer: /body}, all: [{$output: fetch}], when: {$input: /date}}}\n",
        "  - {name: side, operation: noop, input: {x: {$artifact: fetch, name: report}}}\n",
        "  - {name: last, operation: noop, depends_on: [summarise], input: {a: {$artifact: fetch, name: report}, b: {$output: summarise}, c: {$input: /who/nme}, d: {$output: last}}}\n",
    );
    let p = problems(yaml);
    assert_eq!(
        p,
        [
            r#"steps[1].input.text: $output "fech" is not a dependency of "summarise""#,
            r#"steps[2].input.x: $artifact "fetch" is not a dependency of "side""#,
            r#"steps[3].input.c: $input "/who/nme" finds nothing in the run's inputs"#,
            r#"steps[3].input.d: $output "last" is not a dependency of "last""#,
        ],
    );
}

#[test]
fn a_map_runs_over_a_dependencys_output_or_a_run_input_list() {
    let yaml = concat!(
        "name: r\ninputs: {urls: {type: array, default: [a, b]}}\nsteps:\n",
        "  - {name: split, operation: noop}\n",
        "  - {name: each, operation: noop, depends_on: [split], for_each: {$output: split, pointer: /parts}, max_concurrency: 4, tolerated_failures: 2, input: {url: {$item: /url}}}\n",
        "  - {name: fetch, operation: noop, for_each: {$input: /urls}, input: {url: {$item: ''}}}\n",
        "  - {name: lit, operation: noop, for_each: [1, 2, 3]}\n",
    );
    let plan = WorkflowDefinition::parse(yaml, Format::Yaml).unwrap().plan(&config()).unwrap();
    let map = plan.steps[1].map.as_ref().expect("each is a map");
    assert_eq!(map.items, serde_json::json!({"$output": "split", "pointer": "/parts"}));
    assert_eq!((map.max_concurrency, map.tolerated_failures), (Some(4), Some(2)));
    assert_eq!(plan.steps[1].input, serde_json::json!({"url": {"$item": "/url"}}), "the template is kept");
    assert!(plan.steps[0].map.is_none());

    let p = problems(concat!(
        "name: r\ninputs: {one: {type: string, default: x}, many: {type: array, default: [1]}}\nsteps:\n",
        "  - {name: split, operation: noop}\n",
        "  - {name: a, operation: noop, for_each: {$output: split}}\n",
        "  - {name: b, operation: noop, for_each: {$input: /one}}\n",
        "  - {name: c, operation: noop, for_each: {$input: /none}}\n",
        "  - {name: d, operation: noop, for_each: 'a b', max_concurrency: 0}\n",
        "  - {name: e, operation: noop, input: {x: {$item: /x}}, max_concurrency: 2, tolerated_failures: 1}\n",
        "  - {name: f, operation: noop, depends_on: [split], for_each: {$artifact: split, name: parts}}\n",
    ));
    assert_eq!(
        p,
        [
            "steps[4].max_concurrency: must be at least 1",
            "steps[5].max_concurrency: only a step with for_each has children to bound",
            "steps[5].tolerated_failures: only a step with for_each has children to fail",
            r#"steps[1].for_each: $output "split" is not a dependency of "a""#,
            r#"steps[2].for_each: $input "/one" is not a list"#,
            r#"steps[3].for_each: $input "/none" names no declared input (inputs: declares many, one)"#,
            "steps[4].for_each: must be a list, {$output: step, pointer: /json/pointer} or {$input: /json/pointer}",
            r#"steps[5].input.x: $item is the element of a map step's child; "e" has no for_each"#,
            "steps[6].for_each: a map runs over a list: $output or $input, not $artifact",
        ],
    );
    let long =
        format!("name: r\nsteps:\n  - {{name: a, operation: noop, for_each: {:?}}}\n", vec![0; MAX_MAP_ITEMS + 1]);
    assert_eq!(problems(&long), ["steps[0].for_each: 10001 elements; a map runs over at most 10000"]);
}

#[test]
fn malformed_references_are_refused_at_their_field() {
    let p = problems(concat!(
        "name: r\nsteps:\n  - {name: a, operation: noop}\n",
        "  - {name: b, operation: noop, depends_on: [a], input: {t: [{$output: a, pointr: /x}], u: {$output: 1}, v: {$input: date}}}\n",
    ));
    assert_eq!(p.len(), 3, "{p:?}");
    assert!(p[0].starts_with(r#"steps[1].input.t[0]: malformed $output reference (unknown key "pointr")"#), "{p:?}");
    assert!(
        p[1].starts_with(r#"steps[1].input.u: malformed $output reference ("$output" must be a step name"#),
        "{p:?}"
    );
    assert!(
        p[2].starts_with(
            r#"steps[1].input.v: malformed $input reference (pointer "date" is not a JSON Pointer (RFC 6901)"#
        ),
        "{p:?}"
    );
}

#[test]
fn a_valid_flow_plans_with_its_inputs_and_references_kept() {
    let yaml = concat!(
        "name: r\ninputs: {date: {type: string, default: '2026-12-04'}}\nsteps:\n",
        "  - {name: fetch, operation: noop}\n",
        "  - {name: summarise, operation: noop, depends_on: [fetch], input: {text: {$output: fetch, pointer: /body}, date: {$input: /date}}}\n",
    );
    let plan = WorkflowDefinition::parse(yaml, Format::Yaml).unwrap().plan(&config()).unwrap();
    assert_eq!(plan.inputs, serde_json::json!({"date": "2026-12-04"}));
    assert_eq!(
        plan.steps[1].input,
        serde_json::json!({"text": {"$output": "fetch", "pointer": "/body"}, "date": {"$input": "/date"}})
    );
    let plan = WorkflowDefinition::parse("name: r\nsteps: [{name: a, operation: noop}]\n", Format::Yaml)
        .unwrap()
        .plan(&config())
        .unwrap();
    assert_eq!(plan.inputs, serde_json::json!({}));
}

#[test]
fn the_run_output_references_any_step_of_the_run() {
    let yaml = concat!(
        "name: r\ninputs: {date: {type: string}}\n",
        "output: {summary: {$output: b, pointer: /x}, file: {$artifact: a, name: f}, when: [{$input: /date}]}\n",
        "steps:\n  - {name: a, operation: noop}\n  - {name: b, operation: noop}\n",
    );
    let given = serde_json::json!({"date": "d"}).as_object().cloned().unwrap();
    let plan =
        WorkflowDefinition::parse(yaml, Format::Yaml).unwrap().plan_for(&config(), &given, |_, _| false).unwrap();
    assert_eq!(plan.output.as_ref().unwrap()["when"], serde_json::json!([{"$input": "/date"}]));
    // Any value: a bare reference too; `outputs:` is read as `output:`.
    let plan = WorkflowDefinition::parse(
        "name: r\noutputs: {$output: a, pointer: /n}\nsteps: [{name: a, operation: noop}]\n",
        Format::Yaml,
    )
    .unwrap()
    .plan(&config())
    .unwrap();
    assert_eq!(plan.output, Some(serde_json::json!({"$output": "a", "pointer": "/n"})));
    let p = problems(concat!(
        "name: r\noutput: {s: {$output: c}, t: {$input: /nope}, u: {$secret: api}, v: {$artifact: a}}\n",
        "steps:\n  - {name: a, operation: noop}\n",
    ));
    assert_eq!(p.len(), 4, "{p:?}");
    assert!(p.contains(&r#"output.s: $output "c" is not a step of the workflow"#.to_owned()), "{p:?}");
    assert!(
        p.contains(&r#"output.t: $input "/nope" names no declared input (inputs: declares none)"#.to_owned()),
        "{p:?}"
    );
    assert!(p.iter().any(|l| l.starts_with("output.u: a run output cannot be a secret reference")), "{p:?}");
    assert!(p.iter().any(|l| l.starts_with(r#"output.v: malformed $artifact reference ("name" is missing"#)), "{p:?}");
}

#[test]
fn run_inputs_hold_no_secrets_and_respect_the_size_limit() {
    let p = problems(concat!(
        "name: r\ninputs: {token: {type: object, default: {$secret: api}}, db: {type: object, default: {password: hunter2}}, list: {type: array, default: [{$secret: x}]}}\n",
        "steps:\n  - {name: a, operation: noop}\n",
    ));
    assert!(p.iter().any(|l| l.starts_with("inputs.db.default.password: looks like a secret (a password)")), "{p:?}");
    assert!(p.iter().any(|l| l.starts_with("inputs.token.default: a run input cannot be a secret reference")), "{p:?}");
    assert!(
        p.iter().any(|l| l.starts_with("inputs.list.default[0]: a run input cannot be a secret reference")),
        "{p:?}"
    );
    assert!(!p.join("\n").contains("hunter2"), "{p:?}");
    // A value given at submit is checked at the input's own path; its name counts (a
    // `password` input holds a password).
    let given = serde_json::json!({"password": "hunter2", "db": {"password": "hunter2"}});
    let def = WorkflowDefinition::parse(
        "name: r\ninputs: {password: {type: string}, db: {type: object}}\nsteps: [{name: a, operation: noop}]\n",
        Format::Yaml,
    )
    .unwrap();
    let p: Vec<String> = match def.plan_for(&config(), given.as_object().unwrap(), |_, _| false) {
        Err(Error::Invalid(p)) => p.iter().map(ToString::to_string).collect(),
        other => panic!("expected problems, got {other:?}"),
    };
    assert!(p.iter().any(|l| l.starts_with("inputs.password: looks like a secret (a password)")), "{p:?}");
    assert!(p.iter().any(|l| l.starts_with("inputs.db.password: looks like a secret (a password)")), "{p:?}");
    assert!(!p.join("\n").contains("hunter2"), "{p:?}");
    let mut c = config();
    c.max_input_bytes = 10;
    let def = WorkflowDefinition::parse(
        r#"{"name":"r","inputs":{"k":{"type":"string","default":"a long value"}},"steps":[{"name":"a","operation":"x"}]}"#,
        Format::Json,
    )
    .unwrap();
    let err = def.plan(&c).unwrap_err().to_string();
    assert!(err.contains("inputs: 20 bytes") && err.contains("RARA_MAX_INPUT_BYTES"), "{err}");
    // `$stored` is the key of a large run inputs' reference: no input may take its name.
    let def = WorkflowDefinition::parse(
        r#"{"name":"r","inputs":{"$stored":{"type":"object","default":{}}},"steps":[{"name":"a","operation":"x"}]}"#,
        Format::Json,
    )
    .unwrap();
    let err = def.plan(&config()).unwrap_err().to_string();
    assert!(err.contains("the name is reserved"), "{err}");
    let err = WorkflowDefinition::parse("name: r\ninputs: [1]\nsteps: []\n", Format::Yaml).unwrap_err();
    assert!(chain(&err).contains("inputs"), "{}", chain(&err));
}

proptest! {
    // Generated definitions that reach the planner: tests/workflow_planner.rs.
    /// Random DAG edges (only to earlier steps) always plan; adding a back edge is a cycle.
    #[test]
    fn forward_edges_plan_and_back_edges_cycle(edges in proptest::collection::vec((1usize..12, 0usize..12), 0..30)) {
        let n = 12;
        let mut steps: Vec<StepDefinition> = (0..n).map(|i| StepDefinition {
            name: format!("s{i}"), operation: "noop".into(), version: None, input: empty_object(),
            depends_on: vec![], ..Default::default()
        }).collect();
        for (a, b) in edges {
            let (from, to) = (a.max(b), a.min(b));
            let dep = format!("s{to}");
            if from != to && !steps[from].depends_on.contains(&dep) {
                steps[from].depends_on.push(dep);
            }
        }
        let def = WorkflowDefinition { name: "p".into(), idempotency_key: None, inputs: Default::default(), output: None, timeout_seconds: None, steps };
        prop_assert!(def.plan(&config()).is_ok());
        let mut cyclic = def.clone();
        cyclic.steps[0].depends_on.push(format!("s{}", n - 1));
        cyclic.steps[n - 1].depends_on.push("s0".into());
        prop_assert!(matches!(cyclic.plan(&config()), Err(Error::Invalid(_))));
    }
}

#[test]
fn a_run_deadline_is_one_second_to_a_year() {
    let config = config();
    let at = |t: &str| format!("name: r\ntimeout_seconds: {t}\nsteps:\n  - {{name: a, operation: noop}}\n");
    let plan = WorkflowDefinition::parse(&at("5"), Format::Yaml).unwrap().plan(&config).unwrap();
    assert_eq!(plan.timeout_seconds, Some(5));
    for bad in ["0", "31622401"] {
        let err = WorkflowDefinition::parse(&at(bad), Format::Yaml).unwrap().plan(&config).unwrap_err().to_string();
        assert!(err.contains("timeout_seconds: must be 1 to 31622400 (a year)"), "{err}");
    }
}

#[test]
fn a_child_workflow_step_plans_as_the_reserved_operation_with_its_run_as_input() {
    let yaml = "name: r\nsteps:\n  - {name: train, operation: noop}\n  - name: evaluate\n    depends_on: [train]\n    run: { workflow: eval-suite, version: \"3\", inputs: { model: { $output: train, pointer: /uri } } }\n";
    let plan = WorkflowDefinition::parse(yaml, Format::Yaml).unwrap().plan(&config()).unwrap();
    let step = &plan.steps[1];
    assert_eq!(step.operation, crate::workflow::child::CHILD_OPERATION);
    assert_eq!(step.input["workflow"], "eval-suite");
    assert_eq!(step.input["version"], 3);
    assert_eq!(step.input["inputs"]["model"]["$output"], "train");
    assert_eq!(step.depends_on, vec![0]);

    // A map over children: `$item` in the child's inputs.
    let map = "name: r\nsteps:\n  - name: each\n    for_each: [1, 2]\n    max_concurrency: 1\n    run: { workflow: w, inputs: { n: { $item: \"\" } } }\n";
    let plan = WorkflowDefinition::parse(map, Format::Yaml).unwrap().plan(&config()).unwrap();
    assert!(plan.steps[0].map.is_some());
    assert_eq!(plan.steps[0].input["version"], serde_json::Value::Null);
}

#[test]
fn a_child_workflow_step_is_refused_at_the_field_at_fault() {
    let p = problems(
        "name: r\nsteps:\n  - {name: a, operation: noop}\n  - {name: b, operation: noop, run: {workflow: w}}\n  - {name: c, run: {workflow: w, inputs: {x: {$output: a}}}}\n  - {name: d, operation: workflow.run}\n  - {name: e, run: {workflow: \"\"}}\n  - {name: f, wait: {seconds: 5}, run: {workflow: w}}\n",
    );
    assert!(p.iter().any(|l| l.starts_with("steps[1].operation: a step that runs a workflow")), "{p:?}");
    assert!(p.iter().any(|l| l == "steps[2].run.inputs.x: $output \"a\" is not a dependency of \"c\""), "{p:?}");
    assert!(p.iter().any(|l| l.starts_with("steps[3].operation: \"workflow.run\" is reserved")), "{p:?}");
    assert!(p.iter().any(|l| l.starts_with("steps[4].run.workflow: a workflow name is 1 to")), "{p:?}");
    assert!(p.iter().any(|l| l.starts_with("steps[5].run: a step that waits has no operation")), "{p:?}");
}
