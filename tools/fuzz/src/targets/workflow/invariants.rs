//! What must hold of a plan the planner accepted, and of a refusal.

use std::collections::HashSet;
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use rara_domain::StepError;
use rara_domain::config::Config;
use rara_domain::retry::{MAX_RETRY_AFTER, RetryDecision};
use rara_domain::workflow::{
    MAX_MAP_ITEMS, MAX_NAME_LEN, MAX_RETRY_DELAY_SECONDS, MAX_RETRY_MULTIPLIER, MAX_STEPS, MAX_TIMEOUT_SECONDS, Plan,
    Problem,
};

/// The fields a problem's path may start with.
const FIELDS: [&str; 5] = ["name", "idempotency_key", "inputs", "output", "steps"];

/// Every limit of `limits.rs` and of the configuration holds, and the dependencies are a DAG.
pub fn plan_obeys_the_limits(
    plan: &Plan,
    config: &Config,
    in_process: impl Fn(&str, Option<&str>) -> bool,
) -> Result<(), String> {
    let fail = |what: String| Err(format!("accepted plan {what}"));
    if plan.steps.is_empty() || plan.steps.len() > MAX_STEPS {
        return fail(format!("has {} steps", plan.steps.len()));
    }
    if !valid_name(&plan.name) {
        return fail(format!("has run name {:?}", plan.name));
    }
    let mut names = HashSet::new();
    for (i, step) in plan.steps.iter().enumerate() {
        let at = format!("step {i}");
        if !valid_name(&step.name) || !names.insert(step.name.as_str()) {
            return fail(format!("{at} named {:?} (invalid or twice)", step.name));
        }
        let timeout = step.timeout;
        if timeout < Duration::from_secs(1) || timeout > Duration::from_secs(MAX_TIMEOUT_SECONDS) {
            return fail(format!("{at} with timeout {timeout:?}"));
        }
        if in_process(&step.operation, step.version.as_deref()) && timeout > config.invocation_budget() {
            return fail(format!("{at} in-process with timeout {timeout:?} beyond one invocation"));
        }
        let retry = &step.retry;
        if retry.max_attempts == 0 || retry.max_attempts > config.max_attempts_limit {
            return fail(format!("{at} with max_attempts {}", retry.max_attempts));
        }
        let longest = Duration::from_secs(MAX_RETRY_DELAY_SECONDS);
        if retry.max_delay < retry.initial_delay
            || retry.max_delay > longest
            || !(1.0..=MAX_RETRY_MULTIPLIER).contains(&retry.multiplier)
        {
            return fail(format!("{at} with retry {retry:?}"));
        }
        if !step.input.is_object() || step.input.to_string().len() > config.max_input_bytes {
            return fail(format!("{at} with an input that is not an object or too large"));
        }
        let mut seen = HashSet::new();
        if step.depends_on.iter().any(|&d| d >= plan.steps.len() || d == i || !seen.insert(d)) {
            return fail(format!("{at} depending on {:?}", step.depends_on));
        }
        if let Some(map) = &step.map {
            let literal = map.items.as_array().map_or(0, Vec::len);
            if map.max_concurrency == Some(0) || literal > MAX_MAP_ITEMS {
                return fail(format!("{at} mapping {literal} items, max_concurrency {:?}", map.max_concurrency));
            }
        }
        if step.concurrency.as_ref().is_some_and(|c| c.limit == Some(0)) {
            return fail(format!("{at} with concurrency limit 0"));
        }
        decides_without_panicking(step)?;
    }
    acyclic(plan)
}

/// The step's retry policy decides after each attempt, for a backoff and for a retry-after.
fn decides_without_panicking(step: &rara_domain::workflow::PlannedStep) -> Result<(), String> {
    let policy = &step.retry;
    let mut rng = StdRng::seed_from_u64(u64::from(policy.max_attempts));
    let backoff = StepError::retryable("FUZZ", "fuzz");
    let after = backoff.clone().with_details(serde_json::json!({ "retry_after_seconds": u64::MAX }));
    for attempt in [1, 2, policy.max_attempts.saturating_sub(1), policy.max_attempts, u32::MAX] {
        for (error, bound) in [(&backoff, policy.max_delay), (&after, MAX_RETRY_AFTER)] {
            if let RetryDecision::RetryAfter(delay) = policy.decide(attempt, error, &mut rng)
                && delay > bound
            {
                return Err(format!("step {:?} retries after {delay:?}, above {bound:?}", step.name));
            }
        }
    }
    Ok(())
}

/// Kahn's algorithm: every step is reached once its dependencies are.
fn acyclic(plan: &Plan) -> Result<(), String> {
    let mut waiting: Vec<usize> = plan.steps.iter().map(|s| s.depends_on.len()).collect();
    let mut ready: Vec<usize> = (0..plan.steps.len()).filter(|&i| waiting[i] == 0).collect();
    let mut done = 0;
    while let Some(i) = ready.pop() {
        done += 1;
        for (j, step) in plan.steps.iter().enumerate() {
            if step.depends_on.contains(&i) {
                waiting[j] -= 1;
                if waiting[j] == 0 {
                    ready.push(j);
                }
            }
        }
    }
    if done == plan.steps.len() { Ok(()) } else { Err("accepted plan has a dependency cycle".into()) }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '/'))
}

/// A refusal lists problems, each at a path under one of the definition's fields; its class is
/// the first problem's path with the indices left out (`steps[].depends_on[]`).
pub fn refusal_names_fields(problems: &[Problem]) -> Result<String, String> {
    let Some(first) = problems.first() else { return Err("refused without a problem".into()) };
    for problem in problems {
        let root = problem.path.split(['.', '[']).next().unwrap_or_default();
        if !FIELDS.contains(&root) || problem.message.is_empty() {
            return Err(format!("a problem without a field path: {problem:?}"));
        }
    }
    let path: String = first.path.chars().filter(|c| !c.is_ascii_digit()).collect();
    // Map keys and input names are the author's: keep the path to its first two parts.
    let class: Vec<&str> = path.split('.').take(2).collect();
    Ok(format!("refused: {}", class.join(".")))
}
