//! What a reader who is not authenticated is not shown: a run's fences and lease data, the
//! identifiers a peer on the network would need to pose as the holder of a step. The JSON of
//! `GET /api/runs/{id}` loses the fields below ([`run_json`]); the console's run page leaves out
//! the attempts' holder and fence columns (`console::pages`, the same rule).
//!
//! | object | fields hidden |
//! |---|---|
//! | step | `leased_by` (holder), `fence`, `lease_expires_at` |
//! | attempt | `leased_by` (holder), `fence` |
//! | detached stretch | `by` (holder), `sequence` |

use rara_store::read::RunView;
use serde_json::Value;

use crate::{Error, Reader};

const STEP: &[&str] = &["leased_by", "fence", "lease_expires_at"];
const ATTEMPT: &[&str] = &["leased_by", "fence"];
const DETACHED_SPAN: &[&str] = &["by", "sequence"];

/// The run as `reader` may see it.
pub fn run_json(run: &RunView, reader: Reader) -> Result<Value, Error> {
    let mut value = serde_json::to_value(run).map_err(|e| {
        tracing::error!(error = %e, "a run does not serialize");
        Error::new(axum::http::StatusCode::INTERNAL_SERVER_ERROR, "internal", "the run does not serialize", 1)
    })?;
    if !reader.authenticated {
        hide(&mut value);
    }
    Ok(value)
}

fn hide(run: &mut Value) {
    for step in run["steps"].as_array_mut().into_iter().flatten() {
        remove(step, STEP);
        for attempt in step["attempts"].as_array_mut().into_iter().flatten() {
            remove(attempt, ATTEMPT);
            for span in attempt["detached_spans"].as_array_mut().into_iter().flatten() {
                remove(span, DETACHED_SPAN);
            }
        }
    }
}

fn remove(object: &mut Value, fields: &[&str]) {
    if let Some(object) = object.as_object_mut() {
        for field in fields {
            object.remove(*field);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_anonymous_reader_loses_every_holder_fence_and_lease_expiry() {
        let mut run = serde_json::json!({"id": "r", "steps": [{"name": "a", "leased_by": "w", "fence": 7,
            "lease_expires_at": "t", "attempts": [{"attempt": 1, "fence": 7, "leased_by": "w",
            "detached_spans": [{"by": "w", "from": "t", "to": "t", "sequence": 3}]}]}]});
        hide(&mut run);
        let text = run.to_string();
        for field in ["leased_by", "fence", "lease_expires_at", "\"by\"", "sequence"] {
            assert!(!text.contains(field), "{field} in {text}");
        }
        assert_eq!(run["steps"][0]["attempts"][0]["attempt"], 1);
        assert_eq!(run["steps"][0]["attempts"][0]["detached_spans"][0]["from"], "t");
    }
}
