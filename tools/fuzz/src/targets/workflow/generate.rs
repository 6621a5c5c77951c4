//! The target's inputs: definitions generated valid, the examples, both mutated and written as
//! JSON or YAML; and raw text.

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Value, json};

use super::Input;
use crate::targets::mutate::{Mutation, mutate};
use crate::targets::values::{edge_number, edge_text, json_value};

/// The definitions under `examples/`, valid as committed.
const EXAMPLES: [&str; 3] = [
    include_str!("../../../../../examples/data-flow.yaml"),
    include_str!("../../../../../examples/demo.yaml"),
    include_str!("../../../../../examples/flow-control.yaml"),
];

pub fn inputs() -> impl Strategy<Value = Input> {
    let examples: Vec<Value> = EXAMPLES.iter().filter_map(|text| serde_saphyr::from_str(text).ok()).collect();
    let definition = prop_oneof![5 => definition(), 1 => prop::sample::select(examples)];
    let mutation = (
        any::<Index>(),
        prop::sample::select(vec![Mutation::Replace, Mutation::Remove, Mutation::Add]),
        prop_oneof!["[a-z_]{1,16}", Just("$output".to_owned()), Just("$input".to_owned())],
        json_value(),
    )
        .boxed();
    let mutations = prop_oneof![12 => Just(vec![]), 3 => prop::collection::vec(mutation.clone(), 1..2), 1 => prop::collection::vec(mutation, 2..4)];
    let structured = (definition, mutations, any::<bool>(), given(), text_damage()).prop_map(
        |(mut definition, mutations, yaml, given, damage)| {
            for (at, mutation, key, value) in mutations {
                mutate(&mut definition, at.index(usize::MAX), mutation, &key, value);
            }
            let text =
                if yaml { serde_saphyr::to_string(&definition).unwrap_or_default() } else { definition.to_string() };
            Input { text: damage.apply(text), yaml, given }
        },
    );
    let raw = (".{0,400}", any::<bool>()).prop_map(|(text, yaml)| Input { text, yaml, given: Default::default() });
    prop_oneof![9 => structured, 1 => raw]
}

/// Text cut at, or a character changed at, an index (usually neither).
#[derive(Debug, Clone)]
enum Damage {
    None,
    Cut(Index),
    Change(Index, char),
}

impl Damage {
    fn apply(self, text: String) -> String {
        let at = |i: Index| i.index(text.chars().count().max(1));
        match self {
            Damage::None => text,
            Damage::Cut(i) => text.chars().take(at(i)).collect(),
            Damage::Change(i, c) => {
                let i = at(i);
                text.chars().enumerate().map(|(j, old)| if j == i { c } else { old }).collect()
            }
        }
    }
}

fn text_damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        30 => Just(Damage::None),
        1 => any::<Index>().prop_map(Damage::Cut),
        1 => (any::<Index>(), prop_oneof![any::<char>(), prop::sample::select(vec![':', '{', '[', '"', '\n', ' ', '-'])])
            .prop_map(|(i, c)| Damage::Change(i, c)),
    ]
}

/// The run inputs given at submit: usually none, else declared names with any value.
fn given() -> impl Strategy<Value = serde_json::Map<String, Value>> {
    prop_oneof![
        12 => Just(serde_json::Map::new()),
        1 => prop::collection::btree_map(prop::sample::select(vec!["date", "tenant", "items", "limit", "other"]),
            prop_oneof![json_value(), Just(json!("acme")), Just(json!([1, 2, 3]))], 1..3)
            .prop_map(|m| m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()),
    ]
}

/// A definition as an author writes it: run inputs declared, one to eight steps that depend on
/// earlier ones, references, an output.
fn definition() -> impl Strategy<Value = Value> {
    (1usize..8)
        .prop_flat_map(|n| {
            let steps: Vec<_> = (0..n).map(|i| step(i, n)).collect();
            (run_name(), prop::option::weighted(0.2, "[a-z0-9-]{1,20}"), declarations(), steps, output(n))
        })
        .prop_map(|(name, idempotency_key, inputs, steps, output)| {
            let mut definition = json!({ "name": name, "inputs": inputs, "steps": steps });
            if let Some(key) = idempotency_key {
                definition["idempotency_key"] = json!(key);
            }
            if let Some(output) = output {
                definition["output"] = output;
            }
            definition
        })
}

fn run_name() -> impl Strategy<Value = String> {
    prop_oneof![60 => "[a-z][a-z0-9._:/-]{0,30}", 1 => edge_text(), 1 => Just("x".repeat(201))]
}

fn declarations() -> impl Strategy<Value = Value> {
    let all = vec![
        ("date", json!({"type": "string", "default": "2026-12-01"})),
        ("tenant", json!({"type": "string", "default": "demo"})),
        ("items", json!({"type": "array", "default": [1, 2, 3]})),
        ("limit", json!({"type": "integer", "default": 10})),
    ];
    let declared = prop_oneof![3 => Just(all.clone()), 1 => prop::sample::subsequence(all.clone(), 0..=all.len())];
    let wrong = prop::sample::select(vec![
        ("required", json!({"type": "string"})),
        ("wrong", json!({"type": "integer", "default": "ten"})),
        ("odd", json!({"type": "uuid"})),
        ("plain", json!("2026-12-01")),
    ]);
    (declared, prop::option::weighted(0.1, wrong)).prop_map(|(mut d, wrong)| {
        d.extend(wrong);
        Value::Object(d.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
    })
}

/// The name of step `i` (`s0`, `s1`, …) or, rarely, a bad one.
fn step_name(i: usize) -> impl Strategy<Value = String> {
    prop_oneof![100 => Just(format!("s{i}")), 1 => Just("s0".to_owned()), 1 => edge_text()]
}

/// A reference a step's input (or the run's output) may hold, to one of the first `steps`
/// steps (or to step 0 when there is none).
fn reference(steps: usize) -> impl Strategy<Value = Value> {
    let step = (0..steps.max(1)).prop_map(|i| format!("s{i}"));
    let weight = if steps == 0 { 1 } else { 6 };
    prop_oneof![
        weight => (step.clone(), prop::option::of("(/[a-z0-9]{1,6}){0,3}")).prop_map(|(s, p)| match p {
            Some(p) => json!({"$output": s, "pointer": p}),
            None => json!({"$output": s}),
        }),
        1 => (step, "[a-z.]{1,10}").prop_map(|(s, n)| json!({"$artifact": s, "name": n})),
        4 => prop::sample::select(vec!["/date", "/tenant", "/items", "/limit", "/date", "/nope", ""]).prop_map(|p| json!({"$input": p})),
        1 => "(/[a-z0-9]{1,6}){0,2}".prop_map(|p| json!({"$item": p})),
        1 => Just(json!({"$secret": "api"})),
        4 => json_value(),
    ]
}

/// Step `i` of `n`: its dependencies among the steps before it (rarely any other name).
fn step(i: usize, n: usize) -> impl Strategy<Value = Value> {
    let earlier: Vec<String> = (0..i).map(|j| format!("s{j}")).collect();
    let depends_on = prop_oneof![
        20 => Just(earlier.clone()),
        10 => prop::sample::subsequence(earlier.clone(), 0..=earlier.len()),
        1 => prop::collection::vec(prop_oneof![(0..n).prop_map(|j| format!("s{j}")), Just("nope".to_owned())], 0..3),
    ];
    let operation = prop_oneof![
        100 => prop::sample::select(vec!["noop", "sleep", "http.request", "text.stats", "echo"]).prop_map(str::to_owned),
        1 => edge_text(),
    ];
    let input = prop_oneof![
        60 => prop::collection::btree_map("[a-z]{1,8}", reference(i), 0..4)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        1 => json_value(),
    ];
    let fields = (
        step_name(i),
        operation,
        input,
        depends_on,
        prop::option::weighted(0.3, prop_oneof![100 => 1u32..6, 1 => Just(0u32), 1 => any::<u32>()]),
        prop::option::weighted(
            0.3,
            prop_oneof![100 => 1u64..60, 1 => Just(0u64), 1 => Just(86_401u64), 1 => any::<u64>()],
        ),
        prop::option::weighted(0.3, retry()),
        prop::option::weighted(0.2, map(i)),
        prop::option::weighted(0.2, concurrency()),
        prop::option::weighted(0.2, any::<i32>()),
    );
    fields.prop_map(|(name, operation, input, depends_on, max_attempts, timeout, retry, map, concurrency, priority)| {
        let mut step = json!({ "name": name, "operation": operation, "input": input, "depends_on": depends_on });
        let mut set = |field: &str, value: Option<Value>| {
            if let Some(value) = value {
                step[field] = value;
            }
        };
        set("max_attempts", max_attempts.map(Value::from));
        set("timeout_seconds", timeout.map(Value::from));
        set("retry", retry);
        set("concurrency", concurrency);
        set("priority", priority.map(Value::from));
        if let Some((for_each, max_concurrency, tolerated)) = map {
            set("for_each", Some(for_each));
            set("max_concurrency", max_concurrency.map(Value::from));
            set("tolerated_failures", tolerated.map(Value::from));
        }
        step
    })
}

/// `retry:`, each setting ordinary or at an edge (`1e16`, `1e300`, negative, `u64::MAX`).
fn retry() -> impl Strategy<Value = Value> {
    let seconds = prop_oneof![50 => (0.0f64..120.0).prop_map(Value::from), 1 => edge_number()];
    let multiplier = prop_oneof![50 => (1.0f64..5.0).prop_map(Value::from), 1 => edge_number()];
    (prop::option::of(seconds.clone()), prop::option::of(seconds), prop::option::of(multiplier)).prop_map(
        |(initial, max, multiplier)| {
            let mut retry = json!({});
            for (field, value) in
                [("initial_delay_seconds", initial), ("max_delay_seconds", max), ("multiplier", multiplier)]
            {
                if let Some(value) = value {
                    retry[field] = value;
                }
            }
            retry
        },
    )
}

/// `for_each` (a reference or a literal list), `max_concurrency`, `tolerated_failures`.
fn map(steps: usize) -> impl Strategy<Value = (Value, Option<u32>, Option<u32>)> {
    let items = prop_oneof![
        30 => reference(steps),
        10 => prop::collection::vec(json_value(), 0..5).prop_map(Value::Array),
        1 => prop::sample::select(vec![rara_domain::workflow::MAX_MAP_ITEMS, rara_domain::workflow::MAX_MAP_ITEMS + 1])
            .prop_map(|n| Value::Array(vec![json!(0); n])),
    ];
    let count = prop_oneof![20 => 1u32..10, 1 => Just(0u32), 1 => any::<u32>()];
    (items, prop::option::of(count.clone()), prop::option::weighted(0.3, count))
}

fn concurrency() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        12 => Just("tenant-{input.tenant}".to_owned()),
        1 => Just("{input.items}".to_owned()),
        1 => Just("{input.nope}".to_owned()),
        1 => Just("tenant-{".to_owned()),
        1 => edge_text(),
    ];
    (key, prop::option::of(prop_oneof![20 => 1u32..5, 1 => Just(0u32), 1 => any::<u32>()])).prop_map(|(key, limit)| {
        match limit {
            Some(limit) => json!({"key": key, "limit": limit}),
            None => json!({"key": key}),
        }
    })
}

/// The run's output: usually none, else references to its steps.
fn output(steps: usize) -> impl Strategy<Value = Option<Value>> {
    prop::option::weighted(
        0.3,
        prop::collection::btree_map("[a-z]{1,8}", reference(steps), 1..3)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
    )
}
