//! What submit refuses in references: in a step's input, a step that is not one of its
//! dependencies (direct or transitive) or a run input that is not there; in a map's `for_each`,
//! anything that is not a list; in the run's output, a step that is not the run's or a secret.

use std::collections::HashSet;

use serde_json::Value;

use crate::workflow::child::CHILD_OPERATION;
use crate::workflow::inputs::RunInputs;
use crate::workflow::limits::MAX_MAP_ITEMS;
use crate::workflow::plan::PlannedStep;
use crate::workflow::problem::Problem;
use crate::workflow::references::{
    Found, INPUT_KEY, ITEM_KEY, OUTPUT_KEY, POINTER_KEY, Reference, join, reference, scan, secret_references,
};

/// What submit refuses in the references of `steps` (validated otherwise, dependencies as
/// indices) given the run's `inputs`: one problem per reference, at its field path.
pub(super) fn check(steps: &[PlannedStep], inputs: &RunInputs) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let found = scan(&step.input);
        if found.is_empty() && step.map.is_none() {
            continue;
        }
        let upstream = ancestors(steps, i);
        if let Some(map) = &step.map {
            problems.extend(check_for_each(&map.items, &step.name, &upstream, inputs, &format!("steps[{i}].for_each")));
        }
        for Found { path, reference } in found {
            // A child step's input is its `run:` as written (`run.inputs.model`).
            let field = if step.operation == CHILD_OPERATION { "run" } else { "input" };
            let path = join(&format!("steps[{i}].{field}"), &path);
            let message = match reference {
                Err(malformed) => malformed.to_string(),
                Ok(r @ (Reference::Output { step: name, .. } | Reference::Artifact { step: name, .. })) => {
                    if upstream.contains(name) {
                        continue;
                    }
                    format!("{} {name:?} is not a dependency of {:?}", r.key(), step.name)
                }
                Ok(Reference::Input { pointer }) => match inputs.check_pointer(pointer) {
                    None => continue,
                    Some(message) => message,
                },
                Ok(Reference::Item { .. }) => {
                    if step.map.is_some() {
                        continue;
                    }
                    format!("{ITEM_KEY} is the element of a map step's child; {:?} has no for_each", step.name)
                }
            };
            problems.push(Problem { path, message });
        }
    }
    problems
}

/// What submit refuses in a map step's `for_each` (at `path`): anything but a list, a
/// `$output` reference to a step it depends on, or a `$input` reference to a list of the run's
/// inputs (an input declared `array`, or a part of one that is a list); a literal or input list
/// longer than [`MAX_MAP_ITEMS`].
fn check_for_each(items: &Value, step: &str, upstream: &HashSet<&str>, inputs: &RunInputs, path: &str) -> Vec<Problem> {
    let too_long = |list: &Value| {
        list.as_array()
            .filter(|l| l.len() > MAX_MAP_ITEMS)
            .map(|l| format!("{} elements; a map runs over at most {MAX_MAP_ITEMS}", l.len()))
    };
    let message = match reference(items) {
        None if items.is_array() => too_long(items),
        None => Some(format!(
            "must be a list, {{{OUTPUT_KEY}: step, {POINTER_KEY}: /json/pointer}} or {{{INPUT_KEY}: /json/pointer}}"
        )),
        Some(Err(malformed)) => Some(malformed.to_string()),
        Some(Ok(Reference::Output { step: name, .. })) if upstream.contains(name) => None,
        Some(Ok(Reference::Output { step: name, .. })) => {
            Some(format!("{OUTPUT_KEY} {name:?} is not a dependency of {step:?}"))
        }
        Some(Ok(Reference::Input { pointer })) => inputs
            .check_pointer(pointer)
            .or_else(|| inputs.not_a_list(pointer))
            .or_else(|| inputs.values.pointer(pointer).and_then(too_long)),
        Some(Ok(r)) => Some(format!("a map runs over a list: {OUTPUT_KEY} or {INPUT_KEY}, not {}", r.key())),
    };
    message.map(|message| Problem { path: path.to_owned(), message }).into_iter().collect()
}

/// What submit refuses in the run's `output` (a value holding references): a malformed
/// reference, a step that is not one of the run's, a run input that is not there, a secret
/// reference (the output is shown, never executed).
pub(super) fn check_output(steps: &[PlannedStep], output: &Value, inputs: &RunInputs) -> Vec<Problem> {
    let mut problems = Vec::new();
    for path in secret_references(output) {
        problems.push(Problem {
            path: join("output", &path),
            message: "a run output cannot be a secret reference (secrets never flow through references)".into(),
        });
    }
    for Found { path, reference } in scan(output) {
        let message = match reference {
            Err(malformed) => malformed.to_string(),
            Ok(r @ (Reference::Output { step: name, .. } | Reference::Artifact { step: name, .. })) => {
                if steps.iter().any(|s| s.name == name) {
                    continue;
                }
                format!("{} {name:?} is not a step of the workflow", r.key())
            }
            Ok(Reference::Input { pointer }) => match inputs.check_pointer(pointer) {
                None => continue,
                Some(message) => message,
            },
            Ok(Reference::Item { .. }) => format!("{ITEM_KEY} is a map child's element, not in the run's output"),
        };
        problems.push(Problem { path: join("output", &path), message });
    }
    problems
}

/// The names of the steps `i` depends on, directly or transitively.
fn ancestors(steps: &[PlannedStep], i: usize) -> HashSet<&str> {
    let mut seen = HashSet::new();
    let mut todo: Vec<usize> = steps[i].depends_on.clone();
    while let Some(d) = todo.pop() {
        if d != i && seen.insert(steps[d].name.as_str()) {
            todo.extend(&steps[d].depends_on);
        }
    }
    seen
}
