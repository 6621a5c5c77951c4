//! The `remote` target's second invariant: every field of an event, held to the bounds the
//! client applies where it enters ([`rara_remote::bounds`]), ends within them and never panics:
//! a failure's code, message and details (`retry_after_seconds` as the wire's text, clamped to
//! [`MAX_RETRY_AFTER`]), a progress message, an artifact's fields and an output's size.

use rara_domain::StepError;
use rara_domain::retry::MAX_RETRY_AFTER;
use rara_remote::bounds::{self, Limits};
use rara_remote::pb;
use rara_remote::pb::execute_response::Event;

/// `Err` names the field that left its bound.
pub fn within_bounds(event: &pb::ExecuteResponse) -> Result<(), String> {
    match &event.event {
        Some(Event::Failed(failed)) => failure(failed.error.as_ref()),
        Some(Event::Progress(progress)) => {
            let cut = bounds::truncate(progress.message.clone(), bounds::MAX_PROGRESS_MESSAGE_BYTES);
            check("progress.message", cut.len(), bounds::MAX_PROGRESS_MESSAGE_BYTES)
        }
        Some(Event::Artifact(artifact)) => artifact_fields(artifact),
        Some(Event::Succeeded(succeeded)) => {
            let limits = Limits::default();
            let bytes = succeeded.output_json.len();
            match (limits.check_output(bytes), bytes <= limits.max_output_bytes) {
                (Ok(()), true) | (Err(_), false) => Ok(()),
                (result, _) => Err(format!("output of {bytes} bytes judged {result:?}")),
            }
        }
        _ => Ok(()),
    }
}

fn failure(error: Option<&pb::Error>) -> Result<(), String> {
    let Some(error) = error else { return Ok(()) };
    let mut details = serde_json::Map::new();
    for (key, value) in &error.details {
        let value = match key.as_str() {
            "retry_after_seconds" => match bounds::retry_after_seconds(value) {
                Some(seconds) if (0.0..=MAX_RETRY_AFTER.as_secs_f64()).contains(&seconds) => seconds.into(),
                Some(seconds) => return Err(format!("retry_after_seconds {value:?} became {seconds}")),
                None => continue,
            },
            _ => value.clone().into(),
        };
        details.insert(key.clone(), value);
    }
    let step_error = StepError {
        code: error.code.clone(),
        message: error.message.clone(),
        retryable: error.retryable,
        details: details.into(),
    };
    let bounded = bounds::bounded_error(step_error);
    check("error.code", bounded.code.len(), bounds::MAX_ERROR_CODE_BYTES)?;
    check("error.message", bounded.message.len(), bounds::MAX_ERROR_MESSAGE_BYTES)?;
    // The marker that replaces oversized details is small; a kept clamped delay rides along.
    check("error.details", bounded.details.to_string().len(), bounds::MAX_ERROR_DETAILS_BYTES)
}

fn artifact_fields(artifact: &pb::Artifact) -> Result<(), String> {
    for (field, text, bound) in [
        ("artifact.name", &artifact.name, bounds::MAX_ARTIFACT_NAME_BYTES),
        ("artifact.uri", &artifact.uri, bounds::MAX_ARTIFACT_URI_BYTES),
        ("artifact.media_type", &artifact.media_type, bounds::MAX_ARTIFACT_MEDIA_TYPE_BYTES),
        ("artifact.digest", &artifact.digest, bounds::MAX_ARTIFACT_DIGEST_BYTES),
    ] {
        let refused = bounds::within(field, text.len(), bound, "the contract").is_err();
        if refused != (text.len() > bound) {
            return Err(format!("{field} of {} bytes (bound {bound}) refused: {refused}", text.len()));
        }
    }
    Ok(())
}

fn check(field: &str, bytes: usize, bound: usize) -> Result<(), String> {
    if bytes <= bound { Ok(()) } else { Err(format!("{field} is {bytes} bytes after its bound of {bound}")) }
}
