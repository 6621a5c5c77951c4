//! What a step may return, bounded where it enters (DESIGN.md "Bad input"): the [`Limits`]
//! every remote event is held to, and the helpers the runtime uses for in-process executors.
//!
//! | what | bound | beyond it |
//! |---|---|---|
//! | output (`output_json`, or an in-process executor's output serialised) | `RARA_MAX_OUTPUT_BYTES` | the attempt fails, permanent `OUTPUT_TOO_LARGE` |
//! | artifacts per attempt | `RARA_MAX_ARTIFACTS_PER_ATTEMPT` | the attempt fails, permanent `OUTPUT_TOO_LARGE` |
//! | an artifact's name, URI, media type, digest | [`MAX_ARTIFACT_NAME_BYTES`] … | the attempt fails, permanent `OUTPUT_TOO_LARGE` |
//! | an error's code | [`MAX_ERROR_CODE_BYTES`] | cut, with [`TRUNCATED`] |
//! | an error's message | [`MAX_ERROR_MESSAGE_BYTES`] | cut, with [`TRUNCATED`] |
//! | an error's details | [`MAX_ERROR_DETAILS_BYTES`] in all | replaced by `{"details_dropped_bytes": n}` |
//! | an error's `retry_after_seconds` | [`MAX_RETRY_AFTER`] | clamped (NaN, negative: dropped) |
//! | a progress message | [`MAX_PROGRESS_MESSAGE_BYTES`] | cut, with [`TRUNCATED`] |
//! | one gRPC message | the output bound plus [`DECODING_SLACK`] | the attempt fails, permanent `OUTPUT_TOO_LARGE` |
//!
//! An error never repeats the value that was too large: it names the field, its size and the
//! bound. A failure's text is cut rather than refused: the failure is still the step's.

use rara_domain::StepError;
use rara_domain::retry::MAX_RETRY_AFTER;
use rara_domain::step_error::codes;

/// Default `RARA_MAX_OUTPUT_BYTES`: the largest output a step may return (1 MiB).
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 1024 * 1024;
/// Default `RARA_MAX_ARTIFACTS_PER_ATTEMPT`.
pub const DEFAULT_MAX_ARTIFACTS: usize = 100;
pub const MAX_ARTIFACT_NAME_BYTES: usize = 256;
pub const MAX_ARTIFACT_URI_BYTES: usize = 2048;
pub const MAX_ARTIFACT_MEDIA_TYPE_BYTES: usize = 255;
pub const MAX_ARTIFACT_DIGEST_BYTES: usize = 256;
pub const MAX_ERROR_CODE_BYTES: usize = 128;
pub const MAX_ERROR_MESSAGE_BYTES: usize = 8 * 1024;
pub const MAX_ERROR_DETAILS_BYTES: usize = 16 * 1024;
pub const MAX_PROGRESS_MESSAGE_BYTES: usize = 1024;
/// One gRPC message may be this much larger than the output bound (the event's other fields).
pub const DECODING_SLACK: usize = 64 * 1024;
/// What ends a cut text.
pub const TRUNCATED: &str = "… [truncated]";

/// The bounds on what an executor returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `RARA_MAX_OUTPUT_BYTES`.
    pub max_output_bytes: usize,
    /// `RARA_MAX_ARTIFACTS_PER_ATTEMPT`.
    pub max_artifacts: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES, max_artifacts: DEFAULT_MAX_ARTIFACTS }
    }
}

impl Limits {
    /// The largest gRPC message the client decodes (tonic's own default is 4 MiB).
    pub fn max_decoding_message_size(&self) -> usize {
        self.max_output_bytes.saturating_add(DECODING_SLACK)
    }

    /// `Err`: the permanent `OUTPUT_TOO_LARGE` of an output of `bytes` bytes.
    pub fn check_output(&self, bytes: usize) -> Result<(), StepError> {
        within("output", bytes, self.max_output_bytes, "RARA_MAX_OUTPUT_BYTES")
    }
}

/// `Err`: the permanent `OUTPUT_TOO_LARGE` naming `field`, its size and the bound (`setting`:
/// the variable that sets it, or empty for a fixed bound). Never the value.
pub fn within(field: &str, bytes: usize, bound: usize, setting: &str) -> Result<(), StepError> {
    if bytes <= bound {
        return Ok(());
    }
    let set_by = if setting.is_empty() { String::new() } else { format!(" ({setting})") };
    Err(StepError::permanent(
        codes::OUTPUT_TOO_LARGE,
        format!("the executor returned {field} of {bytes} bytes; at most {bound} are allowed{set_by}"),
    )
    .with_details(serde_json::json!({ "field": field, "bytes": bytes, "bound": bound })))
}

/// The permanent `OUTPUT_TOO_LARGE` of a gRPC message beyond the decoding limit `bound`.
pub fn message_too_large(bound: usize) -> StepError {
    StepError::permanent(
        codes::OUTPUT_TOO_LARGE,
        format!(
            "the executor sent a message of more than {bound} bytes (RARA_MAX_OUTPUT_BYTES plus {DECODING_SLACK} for the event)"
        ),
    )
    .with_details(serde_json::json!({ "field": "message", "bound": bound }))
}

/// `text` cut to at most `bound` bytes (on a character boundary, [`TRUNCATED`] included).
pub fn truncate(mut text: String, bound: usize) -> String {
    if text.len() <= bound {
        return text;
    }
    let mut end = bound.saturating_sub(TRUNCATED.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(if bound >= TRUNCATED.len() { TRUNCATED } else { "" });
    text
}

/// A remote `retry_after_seconds` detail as a number within `0..=MAX_RETRY_AFTER` (clamped
/// before any conversion); `None` when it is not a number, NaN or negative.
pub fn retry_after_seconds(raw: &str) -> Option<f64> {
    let seconds: f64 = raw.trim().parse().ok()?;
    (seconds >= 0.0).then(|| seconds.min(MAX_RETRY_AFTER.as_secs_f64()))
}

/// A failure's code, message and details held to their bounds (cut or replaced, never refused).
pub fn bounded_error(mut error: StepError) -> StepError {
    error.code = truncate(error.code, MAX_ERROR_CODE_BYTES);
    error.message = truncate(error.message, MAX_ERROR_MESSAGE_BYTES);
    let bytes = error.details.to_string().len();
    if bytes > MAX_ERROR_DETAILS_BYTES {
        // A clamped delay survives: it decides the retry.
        let retry_after = error.details.get("retry_after_seconds").filter(|v| v.is_number()).cloned();
        let mut marker = serde_json::json!({ "details_dropped_bytes": bytes, "bound": MAX_ERROR_DETAILS_BYTES });
        if let (Some(after), Some(map)) = (retry_after, marker.as_object_mut()) {
            map.insert("retry_after_seconds".into(), after);
        }
        error.details = marker;
    }
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_cut_on_a_character_boundary_with_a_marker() {
        assert_eq!(truncate("short".into(), 100), "short");
        let cut = truncate("é".repeat(1000), 64);
        assert!(cut.len() <= 64 && cut.ends_with(TRUNCATED), "{cut}");
        assert!(truncate("abcdef".into(), 2).len() <= 2);
    }

    #[test]
    fn retry_after_seconds_is_clamped_before_any_conversion() {
        assert_eq!(retry_after_seconds("1e300"), Some(MAX_RETRY_AFTER.as_secs_f64()));
        assert_eq!(retry_after_seconds("inf"), Some(MAX_RETRY_AFTER.as_secs_f64()));
        assert_eq!(retry_after_seconds("NaN"), None);
        assert_eq!(retry_after_seconds("-1"), None);
        assert_eq!(retry_after_seconds("soon"), None);
        assert_eq!(retry_after_seconds(" 2.5 "), Some(2.5));
    }

    #[test]
    fn an_oversized_output_names_the_field_and_the_bound_never_the_value() {
        let err = Limits::default().check_output(4 * 1024 * 1024).unwrap_err();
        assert_eq!((err.code.as_str(), err.retryable), (codes::OUTPUT_TOO_LARGE, false));
        assert!(err.message.contains("output of 4194304 bytes") && err.message.contains("1048576"), "{}", err.message);
    }

    #[test]
    fn oversized_details_are_replaced_by_a_marker_keeping_the_delay() {
        let big = "x".repeat(MAX_ERROR_DETAILS_BYTES);
        let error = StepError::retryable("E", "m".repeat(MAX_ERROR_MESSAGE_BYTES * 2))
            .with_details(serde_json::json!({ "blob": big, "retry_after_seconds": 5.0 }));
        let bounded = bounded_error(error);
        assert!(bounded.message.len() <= MAX_ERROR_MESSAGE_BYTES);
        assert_eq!(bounded.details["retry_after_seconds"], 5.0);
        assert!(bounded.details.get("blob").is_none());
        assert!(bounded.details["details_dropped_bytes"].as_u64().unwrap_or(0) > MAX_ERROR_DETAILS_BYTES as u64);
    }
}
