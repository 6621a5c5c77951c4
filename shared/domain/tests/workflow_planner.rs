//! Property tests of the workflow planner on generated definitions that reach it.
//!
//! The generator builds definitions (not random text, which almost never parses): valid ones
//! (steps depending on earlier steps), about half of them with one or two defects mixed in
//! (a duplicate or malformed name, an unknown, repeated or self dependency, a dependency on
//! any step, two steps depending on each other, an out-of-range `max_attempts`, a non-object
//! input, no steps). Each definition goes through
//! JSON or YAML text and back, so the parser is exercised too. The planner must accept
//! exactly the definitions the small oracle below calls valid, keep the author's order, and
//! never accept a cycle. `the_generator_reaches_both_outcomes` checks the mix itself.

use std::collections::HashMap;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config as RunnerConfig, TestRunner};
use rara_domain::config::Config;
use rara_domain::workflow::{Error, Format, MAX_NAME_LEN, Plan, StepDefinition, WorkflowDefinition};
use serde_json::json;

fn config() -> Config {
    Config::from_lookup("test", |_| None).unwrap_or_else(|e| panic!("the default configuration: {e}"))
}

/// A valid step `i`: named `s{i}`, depending on earlier steps only.
fn valid_step(i: usize) -> impl Strategy<Value = StepDefinition> {
    let earlier = prop::collection::btree_set(0..i.max(1), 0..=i.min(3));
    let max_attempts = prop_oneof![Just(None), (1u32..=5).prop_map(Some)];
    let input = prop_oneof![Just(json!({})), any::<u16>().prop_map(|k| json!({ "k": k, "list": [k, "x"] }))];
    let version = prop_oneof![Just(None), Just(Some("1.0.0".to_owned()))];
    (earlier, max_attempts, input, version).prop_map(move |(earlier, max_attempts, input, version)| StepDefinition {
        name: format!("s{i}"),
        operation: "noop".into(),
        version,
        input,
        depends_on: if i == 0 { vec![] } else { earlier.into_iter().map(|j| format!("s{j}")).collect() },
        max_attempts,
        ..Default::default()
    })
}

/// One defect to mix into a valid definition (steps picked by index); it may or may not make
/// the definition invalid: the oracle decides.
#[derive(Debug, Clone)]
enum Defect {
    DuplicateName(Index, Index),
    BadName(Index, &'static str),
    UnknownDependency(Index),
    SelfDependency(Index),
    RepeatedDependency(Index),
    /// A dependency on any step, perhaps a later one.
    AnyDependency(Index, Index),
    /// Two steps that depend on each other, perhaps through others.
    Cycle(Index, Index),
    MaxAttempts(Index, u32),
    NotAnObject(Index),
    NoSteps,
}

fn defect() -> impl Strategy<Value = Defect> {
    let at = any::<Index>;
    prop_oneof![
        1 => (at(), at()).prop_map(|(a, b)| Defect::DuplicateName(a, b)),
        1 => (at(), prop::sample::select(vec!["", "has space", "ünï"])).prop_map(|(a, n)| Defect::BadName(a, n)),
        1 => at().prop_map(Defect::UnknownDependency),
        1 => at().prop_map(Defect::SelfDependency),
        1 => at().prop_map(Defect::RepeatedDependency),
        3 => (at(), at()).prop_map(|(a, b)| Defect::AnyDependency(a, b)),
        3 => (at(), at()).prop_map(|(a, b)| Defect::Cycle(a, b)),
        1 => (at(), prop_oneof![Just(0u32), 6u32..9]).prop_map(|(a, m)| Defect::MaxAttempts(a, m)),
        1 => at().prop_map(Defect::NotAnObject),
        1 => Just(Defect::NoSteps),
    ]
}

fn apply(steps: &mut Vec<StepDefinition>, defect: &Defect) {
    let n = steps.len();
    if n == 0 {
        return;
    }
    let name = |i: usize| format!("s{i}");
    match defect {
        Defect::DuplicateName(a, b) => steps[a.index(n)].name = name(b.index(n)),
        Defect::BadName(a, bad) => steps[a.index(n)].name = (*bad).to_owned(),
        Defect::UnknownDependency(a) => steps[a.index(n)].depends_on.push("missing".into()),
        Defect::SelfDependency(a) => steps[a.index(n)].depends_on.push(name(a.index(n))),
        Defect::RepeatedDependency(a) => {
            let deps = &mut steps[a.index(n)].depends_on;
            deps.push(deps.first().cloned().unwrap_or_else(|| "missing".into()));
        }
        Defect::AnyDependency(a, b) => steps[a.index(n)].depends_on.push(name(b.index(n))),
        Defect::Cycle(a, b) => {
            let (a, b) = (a.index(n), b.index(n));
            for (from, to) in [(a, b), (b, a)] {
                if !steps[from].depends_on.contains(&name(to)) {
                    steps[from].depends_on.push(name(to));
                }
            }
        }
        Defect::MaxAttempts(a, m) => steps[a.index(n)].max_attempts = Some(*m),
        Defect::NotAnObject(a) => steps[a.index(n)].input = json!(7),
        Defect::NoSteps => steps.clear(),
    }
}

/// Mostly valid definitions of 1 to 8 steps, about half with one or two defects.
fn definition() -> impl Strategy<Value = WorkflowDefinition> {
    let steps = (1usize..9).prop_flat_map(|n| (0..n).map(valid_step).collect::<Vec<_>>());
    let defects = prop_oneof![Just(vec![]), prop::collection::vec(defect(), 1..3)];
    (steps, defects).prop_map(|(mut steps, defects)| {
        for d in &defects {
            apply(&mut steps, d);
        }
        WorkflowDefinition {
            name: "generated".into(),
            idempotency_key: None,
            inputs: Default::default(),
            output: None,
            timeout_seconds: None,
            steps,
        }
    })
}

/// What a valid definition must hold, written without the planner's code.
#[derive(Debug, PartialEq)]
enum Verdict {
    Valid,
    /// Every other rule holds, but the dependencies form a cycle.
    OnlyCyclic,
    Invalid,
}

fn verdict(def: &WorkflowDefinition, config: &Config) -> Verdict {
    let name_ok = |n: &str| {
        !n.is_empty() && n.len() <= MAX_NAME_LEN && n.chars().all(|c| c.is_ascii_alphanumeric() || "-_.:/".contains(c))
    };
    let mut index = HashMap::new();
    let mut ok = !def.steps.is_empty();
    for (i, s) in def.steps.iter().enumerate() {
        ok &= name_ok(&s.name) && index.insert(s.name.as_str(), i).is_none();
    }
    for (i, s) in def.steps.iter().enumerate() {
        let attempts = s.max_attempts.unwrap_or(config.default_retry.max_attempts);
        ok &= s.input.is_object() && (1..=config.max_attempts_limit).contains(&attempts);
        for (k, d) in s.depends_on.iter().enumerate() {
            ok &= index.get(d.as_str()).is_some_and(|&j| j != i) && !s.depends_on[..k].contains(d);
        }
    }
    if !ok {
        return Verdict::Invalid;
    }
    // Kahn's algorithm: every step can be ordered after its dependencies unless there is a cycle.
    let mut waiting: Vec<usize> = def.steps.iter().map(|s| s.depends_on.len()).collect();
    let mut ready: Vec<usize> = (0..def.steps.len()).filter(|&i| waiting[i] == 0).collect();
    let mut ordered = 0;
    while let Some(done) = ready.pop() {
        ordered += 1;
        for (i, s) in def.steps.iter().enumerate() {
            if s.depends_on.iter().any(|d| index[d.as_str()] == done) {
                waiting[i] -= 1;
                if waiting[i] == 0 {
                    ready.push(i);
                }
            }
        }
    }
    if ordered == def.steps.len() { Verdict::Valid } else { Verdict::OnlyCyclic }
}

fn through_text(def: &WorkflowDefinition, yaml: bool) -> (String, Format) {
    let text = if yaml {
        serde_saphyr::to_string(def).map_err(|e| e.to_string())
    } else {
        serde_json::to_string(def).map_err(|e| e.to_string())
    };
    let text = text.unwrap_or_else(|e| panic!("a definition serializes: {e}"));
    (text, if yaml { Format::Yaml } else { Format::Json })
}

/// The plan keeps the author's steps, in order, with dependencies as indices in their order
/// and the defaults applied; every dependency is an earlier-or-later existing step, not itself.
fn check_plan(def: &WorkflowDefinition, plan: &Plan, config: &Config) -> Result<(), TestCaseError> {
    prop_assert_eq!(plan.steps.len(), def.steps.len());
    for (i, (planned, given)) in plan.steps.iter().zip(&def.steps).enumerate() {
        prop_assert_eq!(&planned.name, &given.name);
        prop_assert_eq!(&planned.input, &given.input);
        prop_assert_eq!(&planned.version, &given.version);
        let named: Vec<&str> = planned.depends_on.iter().map(|&d| plan.steps[d].name.as_str()).collect();
        prop_assert_eq!(named, given.depends_on.iter().map(String::as_str).collect::<Vec<_>>());
        prop_assert!(planned.depends_on.iter().all(|&d| d < plan.steps.len() && d != i));
        let attempts = given.max_attempts.unwrap_or(config.default_retry.max_attempts);
        prop_assert_eq!(planned.retry.max_attempts, attempts);
        prop_assert_eq!(planned.timeout, config.default_step_timeout);
    }
    Ok(())
}

/// A refused cycle is named as a real one: `a -> b -> … -> a`, each step depending on the next.
fn check_cycle_message(def: &WorkflowDefinition, message: &str) -> Result<(), TestCaseError> {
    let cycle = message.strip_prefix("dependency cycle: ");
    prop_assert!(cycle.is_some(), "{message}");
    let names: Vec<&str> = cycle.unwrap_or_default().split(" -> ").collect();
    prop_assert!(names.len() >= 3 && names.first() == names.last(), "{message}");
    for pair in names.windows(2) {
        let from = def.steps.iter().find(|s| s.name == pair[0]);
        prop_assert!(from.is_some_and(|s| s.depends_on.iter().any(|d| d == pair[1])), "{message}");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_planner_accepts_exactly_the_valid_definitions(def in definition(), yaml in any::<bool>()) {
        let config = config();
        let (text, format) = through_text(&def, yaml);
        let parsed = WorkflowDefinition::parse(&text, format);
        prop_assert!(parsed.is_ok(), "{text}\n{parsed:?}");
        let parsed = parsed.unwrap_or_else(|_| def.clone());
        prop_assert_eq!(&parsed, &def);
        match (verdict(&def, &config), parsed.plan(&config)) {
            (Verdict::Valid, Ok(plan)) => check_plan(&def, &plan, &config)?,
            (Verdict::OnlyCyclic, Err(Error::Invalid(problems))) => {
                prop_assert_eq!(problems.len(), 1, "{:?}", problems);
                check_cycle_message(&def, &problems[0].message)?;
            }
            (Verdict::Invalid, Err(Error::Invalid(problems))) => {
                prop_assert!(!problems.is_empty());
                prop_assert!(problems.iter().all(|p| !p.message.starts_with("dependency cycle")), "{:?}", problems);
            }
            (expected, got) => prop_assert!(false, "expected {expected:?}, got {got:?} for\n{text}"),
        }
    }

    /// Damaged text (a cut, a stray character) never panics the parser or the planner.
    #[test]
    fn damaged_text_never_panics(def in definition(), yaml in any::<bool>(), at in any::<prop::sample::Index>(), cut in 0usize..20, stray in any::<char>()) {
        let (text, format) = through_text(&def, yaml);
        let chars: Vec<char> = text.chars().collect();
        let at = at.index(chars.len() + 1);
        let damaged: String = chars[..at].iter().chain([stray].iter()).chain(chars[(at + cut).min(chars.len())..].iter()).collect();
        if let Ok(def) = WorkflowDefinition::parse(&damaged, format) {
            let _ = def.plan(&config());
        }
    }
}

/// The generator is only worth something if it reaches every outcome often.
#[test]
fn the_generator_reaches_both_outcomes() {
    let config = config();
    let mut runner = TestRunner::new(RunnerConfig {
        rng_seed: proptest::test_runner::RngSeed::Fixed(13),
        ..RunnerConfig::default()
    });
    let strategy = definition();
    let mut counts: HashMap<String, usize> = HashMap::new();
    let samples = 2000;
    for _ in 0..samples {
        let def = strategy.new_tree(&mut runner).expect("a definition is generated").current();
        *counts.entry(format!("{:?}", verdict(&def, &config))).or_default() += 1;
    }
    eprintln!("outcomes of {samples} generated definitions: {counts:?}");
    let share = |k: &str| counts.get(k).copied().unwrap_or(0) * 100 / samples;
    assert!(share("Valid") >= 20, "{counts:?}");
    assert!(share("Invalid") >= 20, "{counts:?}");
    assert!(share("OnlyCyclic") >= 3, "{counts:?}");
}
