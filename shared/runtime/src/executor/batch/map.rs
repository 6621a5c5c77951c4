//! A map step's two claims (DESIGN.md "Data flow", fan-out). Neither runs the step's
//! operation; both read what they need in the batch's one references statement
//! (`references.rs`) and end at once, through the normal outcome path:
//! - the first resolves `for_each` to a list and ends as [`Execution::Expanded`]: one child
//!   per element, each with the map's input substituted whole, `$item` by its element
//!   (recorded fenced). A child's claim substitutes nothing more: a value brought in is never
//!   read as a reference again;
//! - the second, once every child succeeded, ends as a success whose output is the list of
//!   the children's outputs, in element order.
//!
//! A list that is not there fails the map step for good with `INPUT_REFERENCE_MISSING`; one
//! that is not a list, has more than [`MAX_MAP_ITEMS`] elements or makes a child's input
//! too large, with `INVALID_INPUT`. A gathering whose children's outputs total more than
//! `RARA_MAX_GATHERED_BYTES` (summed in Postgres: nothing is read) fails for good with
//! `OUTPUT_TOO_LARGE`. No value is echoed in an error.

use std::collections::HashMap;

use rara_domain::StepError;
use rara_domain::references::{self, Missing, Sources};
use rara_domain::step_error::codes;
use rara_domain::workflow::MAX_MAP_ITEMS;
use rara_store::claim::{ClaimedStep, MapPhase};
use rara_store::map::{Expansion, child_name};
use rara_store::references::Needs;
use serde_json::Value;
use uuid::Uuid;

use super::BatchExecutor;
use crate::executor::execution::Execution;

/// Whether the claim `map` is the second, which gathers the children's outputs.
pub(super) fn gathers(map: &MapPhase) -> bool {
    matches!(map, MapPhase::Gather { .. })
}

impl BatchExecutor {
    /// The gathering claims whose children's outputs total at most `RARA_MAX_GATHERED_BYTES`
    /// (measured in one statement, nothing read), with their needs added; the others end in
    /// `ended` (permanent `OUTPUT_TOO_LARGE`, or retryable when they could not be measured).
    /// Claims that do not gather pass as they are.
    pub(super) async fn bound_gatherings<'a>(
        &self,
        maps: Vec<&'a ClaimedStep>,
        needs: &mut Needs,
        ended: &mut HashMap<Uuid, Execution>,
    ) -> Vec<&'a ClaimedStep> {
        let ids: Vec<Uuid> =
            maps.iter().filter(|s| s.map.as_ref().is_some_and(gathers)).map(|s| s.holder.step_id).collect();
        if ids.is_empty() {
            return maps;
        }
        let totals = match self.db(self.env.store.gathered_bytes(&ids)).await {
            Ok(totals) => Some(totals),
            Err(e) => {
                tracing::error!(error = %e, maps = ids.len(), "could not measure what the map steps gather");
                None
            }
        };
        let bound = self.max_gathered_bytes as u64;
        let mut kept = Vec::with_capacity(maps.len());
        for step in maps {
            let Some(map) = step.map.as_ref().filter(|m| gathers(m)) else {
                kept.push(step);
                continue;
            };
            let id = step.holder.step_id;
            let Some(total) = totals.as_ref().map(|t| t.get(&id).copied().unwrap_or(0)) else {
                ended.insert(id, super::references::unavailable("could not be measured"));
                continue;
            };
            if total > bound {
                tracing::warn!(step_id = %id, total, bound, "the map's children's outputs are too large to gather; it fails");
                ended.insert(id, Execution::Failed(too_large_to_gather(total, bound)));
                continue;
            }
            add_needs(step, map, needs);
            kept.push(step);
        }
        kept
    }
}

/// The permanent `OUTPUT_TOO_LARGE` of a map whose children's outputs total `total` bytes.
fn too_large_to_gather(total: u64, bound: u64) -> StepError {
    StepError::permanent(
        codes::OUTPUT_TOO_LARGE,
        format!(
            "the map's children's outputs total {total} bytes; a map gathers at most {bound} (RARA_MAX_GATHERED_BYTES)"
        ),
    )
    .with_details(serde_json::json!({ "field": "children", "bytes": total, "bound": bound }))
}

/// What the claim `map` of `step` reads: the references of its list, or its children's outputs.
pub(super) fn add_needs(step: &ClaimedStep, map: &MapPhase, needs: &mut Needs) {
    match map {
        // The list, and what the children's inputs reference: they are substituted whole now.
        MapPhase::Expand { for_each, .. } => {
            for found in references::scan(for_each).into_iter().chain(references::scan(&step.input)) {
                if let Ok(reference) = found.reference {
                    needs.add(step.run_id, &reference);
                }
            }
        }
        MapPhase::Gather { size, .. } => {
            for i in 0..*size {
                needs.add_output(step.run_id, child_name(&step.name, i));
            }
        }
    }
}

/// How the claim `map` of `step` ends, given what the batch read.
pub(super) fn end(step: &ClaimedStep, map: &MapPhase, sources: &impl Sources, max_input_bytes: usize) -> Execution {
    match map {
        MapPhase::Expand { for_each, .. } => match expand(step, for_each, sources, max_input_bytes) {
            Ok(expansion) => Execution::Expanded(expansion),
            Err(error) => {
                tracing::warn!(step_id = %step.holder.step_id, code = %error.code, "the map step cannot be expanded; it fails without running");
                Execution::Failed(error)
            }
        },
        MapPhase::Gather { size, failures_tolerated } => gather(step, *size, *failures_tolerated, sources),
    }
}

fn expand(
    step: &ClaimedStep,
    for_each: &Value,
    sources: &impl Sources,
    max_input_bytes: usize,
) -> Result<Expansion, StepError> {
    let list = references::substitute_in("for_each", for_each, sources).map_err(|m| m.to_step_error())?;
    let Value::Array(items) = list else {
        return Err(StepError::permanent(
            codes::INVALID_INPUT,
            format!("for_each found {}, not a list", rara_domain::human::kind(&list)),
        ));
    };
    if items.len() > MAX_MAP_ITEMS {
        return Err(StepError::permanent(
            codes::INVALID_INPUT,
            format!("for_each found {} elements; a map runs over at most {MAX_MAP_ITEMS}", items.len()),
        ));
    }
    let mut children = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let input = references::substitute_child(&step.input, sources, item)
            .map_err(|m| Missing { field: format!("{} (element {i})", m.field), ..m }.to_step_error())?;
        let bytes = input.to_string().len();
        if bytes > max_input_bytes {
            return Err(StepError::permanent(
                codes::INVALID_INPUT,
                format!(
                    "the input of child {i} is {bytes} bytes with its element; at most {max_input_bytes} are allowed (RARA_MAX_INPUT_BYTES)"
                ),
            ));
        }
        children.push(input);
    }
    Ok(Expansion { holder: step.holder.clone(), name: step.name.clone(), children })
}

fn gather(step: &ClaimedStep, size: u32, failures_tolerated: bool, sources: &impl Sources) -> Execution {
    let mut outputs = Vec::with_capacity(size as usize);
    for i in 0..size {
        let child = child_name(&step.name, i);
        match sources.output(&child) {
            Some(output) => outputs.push(output.clone()),
            // A child that failed within the map's `tolerated_failures`.
            None if failures_tolerated => outputs.push(Value::Null),
            None => {
                // Every child succeeded before the map step became due again: a child without
                // an output is a broken invariant, and the map must not pretend it ran.
                let missing = Missing {
                    field: "children".into(),
                    what: format!("child {child:?} has no output (it has not succeeded)"),
                    step: Some(child),
                    pointer: None,
                };
                return Execution::Failed(missing.to_step_error());
            }
        }
    }
    Execution::Succeeded(Value::Array(outputs))
}

#[cfg(test)]
mod tests {

    use serde_json::json;

    use super::*;

    struct Values {
        outputs: Vec<(String, Value)>,
        inputs: Value,
    }

    impl Sources for Values {
        fn output(&self, step: &str) -> Option<&Value> {
            self.outputs.iter().find(|(s, _)| s == step).map(|(_, v)| v)
        }
        fn artifact(&self, _: &str, _: &str) -> Option<&Value> {
            None
        }
        fn inputs(&self) -> Option<&Value> {
            Some(&self.inputs)
        }
    }

    fn map_step(input: Value, map: MapPhase) -> ClaimedStep {
        ClaimedStep { map: Some(map), ..super::super::test_claim("each", "text.stats", input) }
    }

    fn ended(step: &ClaimedStep, sources: &Values) -> Execution {
        end(step, step.map.as_ref().expect("a map step"), sources, 1_000)
    }

    #[test]
    fn the_first_claim_makes_one_child_per_element_with_its_item_substituted() {
        let for_each = json!({"$output": "split", "pointer": "/parts"});
        let input = json!({"text": {"$item": "/text"}, "whole": {"$item": ""}, "date": {"$input": "/date"}});
        let step = map_step(input, MapPhase::Expand { for_each, max_concurrency: Some(2) });
        let sources = Values {
            outputs: vec![("split".into(), json!({"parts": [{"text": "a b"}, {"text": "c", "$secret": "x"}]}))],
            inputs: json!({"date": "2026-12-04"}),
        };
        let Execution::Expanded(expansion) = ended(&step, &sources) else { panic!("expected an expansion") };
        assert_eq!(expansion.holder, step.holder);
        assert_eq!(
            expansion.children,
            vec![
                json!({"text": "a b", "whole": {"text": "a b"}, "date": "2026-12-04"}),
                // A `$secret` brought in by the element is escaped, never resolved.
                json!({"text": "c", "whole": {"text": "c", "$$secret": "x"}, "date": "2026-12-04"}),
            ]
        );
    }

    #[test]
    fn a_list_that_is_missing_or_not_a_list_fails_the_map_for_good_without_echoing_it() {
        let sources =
            Values { outputs: vec![("split".into(), json!({"parts": "secret-ish text"}))], inputs: json!({}) };
        let missing = map_step(
            json!({}),
            MapPhase::Expand { for_each: json!({"$output": "split", "pointer": "/nope"}), max_concurrency: None },
        );
        let Execution::Failed(e) = ended(&missing, &sources) else { panic!("expected a failure") };
        assert_eq!((e.code.as_str(), e.retryable), (codes::INPUT_REFERENCE_MISSING, false));
        assert!(e.message.starts_with("for_each: "), "{}", e.message);

        let not_a_list = map_step(
            json!({}),
            MapPhase::Expand { for_each: json!({"$output": "split", "pointer": "/parts"}), max_concurrency: None },
        );
        let Execution::Failed(e) = ended(&not_a_list, &sources) else { panic!("expected a failure") };
        assert_eq!((e.code.as_str(), e.retryable), (codes::INVALID_INPUT, false));
        assert_eq!(e.message, "for_each found a string, not a list");

        let bad_item = map_step(
            json!({"x": {"$item": "/missing"}}),
            MapPhase::Expand { for_each: json!([{"a": 1}]), max_concurrency: None },
        );
        let Execution::Failed(e) = ended(&bad_item, &sources) else { panic!("expected a failure") };
        assert_eq!(e.code, codes::INPUT_REFERENCE_MISSING);
        assert!(e.message.starts_with("input.x (element 0): "), "{}", e.message);
    }

    #[test]
    fn the_second_claim_gathers_the_childrens_outputs_in_order() {
        let step = map_step(json!({}), MapPhase::Gather { size: 3, failures_tolerated: false });
        let outputs = (0..3).rev().map(|i| (format!("each[{i}]"), json!({ "n": i }))).collect();
        let sources = Values { outputs, inputs: json!({}) };
        assert_eq!(ended(&step, &sources), Execution::Succeeded(json!([{"n": 0}, {"n": 1}, {"n": 2}])));
        let empty = map_step(json!({}), MapPhase::Gather { size: 0, failures_tolerated: false });
        assert_eq!(ended(&empty, &sources), Execution::Succeeded(json!([])));
        let short = map_step(json!({}), MapPhase::Gather { size: 4, failures_tolerated: false });
        let Execution::Failed(e) = ended(&short, &sources) else { panic!("expected a failure") };
        assert!(e.message.contains("\"each[3]\" has no output"), "{}", e.message);
        // Within `tolerated_failures`, a failed child's place holds null.
        let tolerant = map_step(json!({}), MapPhase::Gather { size: 4, failures_tolerated: true });
        assert_eq!(ended(&tolerant, &sources), Execution::Succeeded(json!([{"n": 0}, {"n": 1}, {"n": 2}, null])));
    }
}
