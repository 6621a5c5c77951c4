//! What an executor returned, held to its bound before it is recorded: an output beyond
//! `RARA_MAX_OUTPUT_BYTES` fails the attempt (the same bound a remote executor's stream checks
//! where it enters, [`rara_remote::bounds`]).

use rara_domain::StepError;

use crate::secrets;

/// The output, redacted, unless it (serialised) exceeds `RARA_MAX_OUTPUT_BYTES`: then the
/// attempt's permanent `OUTPUT_TOO_LARGE` (never the value). Measured before the redaction,
/// which only shortens it.
pub(crate) fn bounded(
    output: serde_json::Value,
    redactor: &secrets::Redactor,
    limits: &rara_remote::Limits,
) -> Result<serde_json::Value, StepError> {
    let bytes = serde_json::to_vec(&output).map_or(usize::MAX, |bytes| bytes.len());
    if let Err(error) = limits.check_output(bytes) {
        tracing::warn!(bytes, bound = limits.max_output_bytes, "the executor's output is too large; the attempt fails");
        return Err(error);
    }
    // What an executor returned never reads as an offloaded output's reference.
    Ok(rara_domain::stored::escape(redactor.json(output)))
}

#[cfg(test)]
mod tests {
    use rara_domain::step_error::codes;
    use serde_json::json;

    use super::*;

    #[test]
    fn an_in_process_output_beyond_the_bound_fails_for_good_naming_the_bound() {
        let limits = rara_remote::Limits { max_output_bytes: 100, ..Default::default() };
        let redactor = secrets::Redactor::default();
        assert!(bounded(json!({"a": 1}), &redactor, &limits).is_ok());
        let err = bounded(json!({"blob": "x".repeat(200)}), &redactor, &limits).unwrap_err();
        assert_eq!((err.code.as_str(), err.retryable), (codes::OUTPUT_TOO_LARGE, false));
        assert_eq!((err.details["field"].as_str(), err.details["bound"].as_u64()), (Some("output"), Some(100)));
        assert!(!err.message.contains("xxx"), "{}", err.message);
    }
}
