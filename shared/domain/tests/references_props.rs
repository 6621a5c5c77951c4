//! Property tests of data flow (`rara_domain::references`) on generated values and graphs:
//! - a JSON Pointer built from any path into any value (keys with `/` and `~` escaped as RFC
//!   6901 says) finds exactly that part, through `$output`, `$input` and a map's `$item`; one
//!   more key that is not there is `INPUT_REFERENCE_MISSING`, naming the field and never a value;
//! - submit refuses a reference exactly when it names a step that is not an ancestor of the
//!   referring step (the oracle: a transitive closure), with the field path;
//! - a `$secret` inside a value brought in is escaped once, never resolvable.

use std::collections::HashSet;

use proptest::prelude::*;
use rara_domain::config::Config;
use rara_domain::references::{self, Sources};
use rara_domain::step_error::codes;
use rara_domain::workflow::{Error, Format, WorkflowDefinition};
use serde_json::{Value, json};

/// A JSON value whose keys include the characters RFC 6901 escapes.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|n| json!(n)),
        "[a-z ]{0,8}".prop_map(Value::String),
        // An echoed secret reference: data once brought in, never resolved.
        Just(json!({"$secret": "api"})),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map("[a-z/~]{0,4}", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Every path (as its RFC 6901 pointer) to a part of `value`, the whole value (`""`) first.
fn pointers(value: &Value, at: String, out: &mut Vec<(String, Value)>) {
    out.push((at.clone(), value.clone()));
    match value {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                pointers(item, format!("{at}/{i}"), out);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                pointers(item, format!("{at}/{}", key.replace('~', "~0").replace('/', "~1")), out);
            }
        }
        _ => {}
    }
}

struct Upstream {
    output: Value,
    inputs: Value,
}

impl Sources for Upstream {
    fn output(&self, step: &str) -> Option<&Value> {
        (step == "up").then_some(&self.output)
    }
    fn artifact(&self, _: &str, _: &str) -> Option<&Value> {
        None
    }
    fn inputs(&self) -> Option<&Value> {
        Some(&self.inputs)
    }
}

/// What a value brought in becomes: its `$secret` keys escaped (`$$secret`), nothing else.
fn escaped(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let key = if k.starts_with('$') && k.trim_start_matches('$') == "secret" {
                        format!("${k}")
                    } else {
                        k.clone()
                    };
                    (key, escaped(v))
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(escaped).collect()),
        other => other.clone(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_pointer_to_any_part_finds_exactly_that_part(v in value(), pick in any::<prop::sample::Index>()) {
        let mut all = Vec::new();
        pointers(&v, String::new(), &mut all);
        let (pointer, part) = &all[pick.index(all.len())];
        let sources = Upstream { output: v.clone(), inputs: v.clone() };
        let input = json!({
            "a": {"$output": "up", "pointer": pointer},
            "b": [{"$input": pointer}],
        });
        let got = references::substitute(&input, &sources);
        prop_assert_eq!(got.ok(), Some(json!({"a": escaped(part), "b": [escaped(part)]})));
        // A map child's element: `$item` finds the same part of it.
        let child = references::substitute_child(&json!({"x": {"$item": pointer}}), &sources, &v);
        prop_assert_eq!(child.ok(), Some(json!({"x": part})));
    }

    #[test]
    fn a_pointer_past_the_value_fails_naming_the_field_never_a_value(v in value(), pick in any::<prop::sample::Index>()) {
        let mut all = Vec::new();
        pointers(&v, String::new(), &mut all);
        let (pointer, _) = &all[pick.index(all.len())];
        let missing = format!("{pointer}/nowhere~1at~0all");
        let sources = Upstream { output: v.clone(), inputs: json!({}) };
        let input = json!({"deep": {"text": {"$output": "up", "pointer": missing}}});
        let error = references::substitute(&input, &sources).err().map(|m| m.to_step_error());
        prop_assert!(error.is_some());
        let error = error.unwrap_or_else(|| unreachable!());
        prop_assert_eq!(error.code.as_str(), codes::INPUT_REFERENCE_MISSING);
        prop_assert!(!error.retryable);
        prop_assert!(error.message.starts_with("input.deep.text: "), "{}", error.message);
        // The upstream value itself is never in the message (only the step and the pointer).
        if let Some(text) = v.as_str().filter(|s| s.len() > 3) {
            prop_assert!(!error.message.contains(text), "{}", error.message);
        }
    }

    #[test]
    fn submit_refuses_exactly_the_references_to_steps_that_are_not_ancestors(
        n in 2usize..8,
        edges in prop::collection::vec((0usize..8, 0usize..8), 0..12),
        refs in prop::collection::vec((0usize..8, 0usize..8), 1..6),
    ) {
        // Step i depends on earlier steps only (no cycles); `refs` are (from, to) references.
        let mut deps: Vec<HashSet<usize>> = vec![HashSet::new(); n];
        for (a, b) in edges {
            let (a, b) = (a % n, b % n);
            if a > b {
                deps[a].insert(b);
            }
        }
        let mut inputs: Vec<serde_json::Map<String, Value>> = vec![serde_json::Map::new(); n];
        for (k, (from, to)) in refs.iter().enumerate() {
            inputs[from % n].insert(format!("r{k}"), json!({"$output": format!("s{}", to % n)}));
        }
        let steps: Vec<Value> = (0..n).map(|i| {
            let mut on: Vec<String> = deps[i].iter().map(|j| format!("s{j}")).collect();
            on.sort();
            json!({"name": format!("s{i}"), "operation": "noop", "input": inputs[i], "depends_on": on})
        }).collect();
        let text = json!({"name": "p", "steps": steps}).to_string();
        let definition = WorkflowDefinition::parse(&text, Format::Json).unwrap_or_else(|e| panic!("{e}: {text}"));

        // The oracle: ancestors by transitive closure.
        let ancestors = |i: usize| {
            let mut seen = HashSet::new();
            let mut stack: Vec<usize> = deps[i].iter().copied().collect();
            while let Some(j) = stack.pop() {
                if seen.insert(j) {
                    stack.extend(deps[j].iter().copied());
                }
            }
            seen
        };
        let mut expected: Vec<String> = refs.iter().enumerate()
            .filter(|(_, (from, to))| !ancestors(from % n).contains(&(to % n)))
            .map(|(k, (from, to))| format!(
                "steps[{}].input.r{k}: $output \"s{}\" is not a dependency of \"s{}\"", from % n, to % n, from % n))
            .collect();
        expected.sort();

        let config = Config::from_lookup("test", |_| None).unwrap_or_else(|e| panic!("{e}"));
        let mut got: Vec<String> = match definition.plan(&config) {
            Ok(_) => Vec::new(),
            Err(Error::Invalid(problems)) => problems.iter().map(|p| format!("{}: {}", p.path, p.message)).collect(),
            Err(other) => return Err(TestCaseError::fail(format!("{other:?}"))),
        };
        got.sort();
        prop_assert_eq!(got, expected);
    }
}
