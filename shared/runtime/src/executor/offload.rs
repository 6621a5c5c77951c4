//! Large outputs by reference (a claim check; DESIGN.md "Artifacts and large values"). An
//! output larger than `RARA_INLINE_OUTPUT_BYTES` (serialised) is written to the artifact store
//! (`runs/{run}/{step}/{attempt}.output.json`, still under the lease) and the step records
//! `{"$stored": {uri, size_bytes, digest, media_type}}` instead ([`rara_domain::stored`]).
//!
//! At claim, a `$output` reference *with a pointer* into such an output reads the object once
//! per batch, checks its digest and takes the value at the pointer (`batch/stored.rs`); a
//! reference to the whole output passes the `$stored` reference on (a remote executor's
//! context reads it when it needs it).
//!
//! | what fails | the attempt |
//! | --- | --- |
//! | writing the output (the store unreachable) | retryable `ARTIFACT_STORE_UNAVAILABLE` |
//! | reading an offloaded output (or run inputs) a pointer needs (the store unreachable, no store configured) | retryable `ARTIFACT_STORE_UNAVAILABLE` |
//! | the object is missing, outside the store or the run, not its digest, beyond `RARA_MAX_OUTPUT_BYTES` (inputs: `RARA_MAX_INPUT_BYTES`), not JSON | permanent `INPUT_REFERENCE_MISSING` |
//!
//! A run's inputs beyond the inline bound are offloaded when the run is submitted
//! (`rara_operator::inputs`, `runs/{run}/inputs.json`); `$input` references with a pointer into
//! them read the object the same way (`batch/stored.rs`).

use std::sync::Arc;

use rara_artifacts::port::reader_of;
use rara_artifacts::{ArtifactStore, Key};
use rara_domain::StepError;
use rara_domain::step_error::codes;
use rara_domain::stored::Descriptor;
use rara_store::claim::ClaimedStep;
use serde_json::Value;
use uuid::Uuid;

use crate::executor::end::Execution;

/// The media type of an offloaded output.
pub const OUTPUT_MEDIA_TYPE: &str = "application/json";

/// Where outputs beyond the inline bound go (nowhere by default).
#[derive(Debug, Clone)]
pub struct Offload {
    store: Option<Arc<dyn ArtifactStore>>,
    inline_bytes: usize,
}

impl Offload {
    /// No store: every output stays inline.
    pub fn inline() -> Self {
        Offload { store: None, inline_bytes: usize::MAX }
    }

    /// Outputs larger than `inline_bytes` go to `store`.
    pub fn to(store: Arc<dyn ArtifactStore>, inline_bytes: usize) -> Self {
        Offload { store: Some(store), inline_bytes }
    }

    pub fn store(&self) -> Option<&Arc<dyn ArtifactStore>> {
        self.store.as_ref()
    }

    /// `execution`, its output written to the store and replaced by a reference when it is
    /// larger than the inline bound.
    pub(crate) async fn output(&self, step: &ClaimedStep, execution: Execution) -> Execution {
        let (Some(store), Execution::Succeeded(output)) = (&self.store, &execution) else { return execution };
        let bytes = match serde_json::to_vec(output) {
            Ok(bytes) if bytes.len() > self.inline_bytes => bytes,
            _ => return execution,
        };
        let size = bytes.len();
        let key = Key::output(step.run_id, step.holder.step_id, step.attempt);
        match store.put(&key, reader_of(bytes), Some(OUTPUT_MEDIA_TYPE)).await {
            Ok(stored) => {
                tracing::info!(bytes = size, "the output is beyond the inline bound; stored by reference");
                let descriptor = Descriptor {
                    uri: stored.uri,
                    size_bytes: stored.size_bytes,
                    digest: stored.digest,
                    media_type: stored.media_type,
                };
                Execution::Succeeded(descriptor.reference())
            }
            Err(e) => {
                tracing::warn!(error = %e, bytes = size, "the output could not be written to the artifact store");
                Execution::Failed(StepError::retryable(
                    codes::ARTIFACT_STORE_UNAVAILABLE,
                    format!(
                        "the output ({size} bytes, beyond RARA_INLINE_OUTPUT_BYTES) could not be written to the artifact store"
                    ),
                ))
            }
        }
    }

    /// The offloaded value `descriptor` (`what`: "output", "inputs") of the run `run`, read
    /// whole (at most `bound` bytes) and checked against its digest.
    pub(crate) async fn load(
        &self,
        run: Uuid,
        descriptor: &Descriptor,
        bound: u64,
        what: &str,
    ) -> Result<Value, StepError> {
        let missing = |why: String| StepError::permanent(codes::INPUT_REFERENCE_MISSING, why);
        let Some(store) = &self.store else {
            return Err(StepError::retryable(
                codes::ARTIFACT_STORE_UNAVAILABLE,
                format!("the offloaded {what}: no artifact store is configured (RARA_ARTIFACTS_URI)"),
            ));
        };
        let key = store.location().key_of(&descriptor.uri).map_err(|e| missing(e.to_string()))?;
        if !key.is_of_run(run) {
            return Err(missing(format!("{} is not an object of this run", descriptor.uri)));
        }
        let bytes = store.read_verified(&key, Some(&descriptor.digest), bound).await.map_err(|e| {
            tracing::warn!(error = %e, what, "an offloaded value could not be read");
            if e.is_transient() {
                StepError::retryable(codes::ARTIFACT_STORE_UNAVAILABLE, format!("the offloaded {what}: {e}"))
            } else {
                missing(format!("the offloaded {what}: {e}"))
            }
        })?;
        serde_json::from_slice(&bytes)
            .map_err(|e| missing(format!("the offloaded {what} at {} is not JSON: {e}", descriptor.uri)))
    }
}
