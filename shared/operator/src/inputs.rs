//! Large run inputs by reference (a claim check; DESIGN.md "Artifacts and large values"), as
//! `POST /api/runs`, `rara submit` and the scheduler's schedule fires store a run: inputs larger than the inline bound
//! (`RARA_INLINE_OUTPUT_BYTES`, serialised) are written to the artifact store under the new
//! run's prefix (`runs/{run}/inputs.json`, with their sha256) before the run is stored, and the
//! run keeps `{"$stored": {uri, size_bytes, digest, media_type}}` ([`rara_domain::stored`]).
//! The accepted size is bounded before, by the planner (`RARA_MAX_INPUT_BYTES`).
//!
//! | what happens | the object |
//! | --- | --- |
//! | the run is stored | kept; pruning the run deletes it with everything under `runs/{run}/` |
//! | the idempotency key names an existing run (same digest: that run; else a conflict) | deleted |
//! | the store refuses the run | deleted |
//! | the process dies between the write and the run's commit (or a schedule round that made the run rolls back) | left under a prefix no run has |
//!
//! No store configured: the inputs stay inline, bounded by `RARA_MAX_INPUT_BYTES` as ever.

use std::sync::Arc;

use rara_artifacts::port::reader_of;
use rara_artifacts::{ArtifactStore, Key};
use rara_domain::stored::Descriptor;
use rara_domain::workflow::Plan;
use rara_store::Store;
use rara_store::submit::{Origin, Submitted};
use uuid::Uuid;

/// The media type of offloaded inputs.
pub const INPUTS_MEDIA_TYPE: &str = "application/json";

/// A submission that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] rara_store::Error),
    /// The inputs are beyond the inline bound and could not be written; nothing was stored.
    #[error(
        "the run's inputs ({bytes} bytes, beyond RARA_INLINE_OUTPUT_BYTES) could not be written to the artifact store"
    )]
    Artifacts {
        bytes: usize,
        #[source]
        source: rara_artifacts::Error,
    },
}

/// Where run inputs beyond the inline bound go.
#[derive(Debug, Clone)]
pub struct Offload {
    pub store: Arc<dyn ArtifactStore>,
    /// `RARA_INLINE_OUTPUT_BYTES`: the largest inputs kept inline.
    pub inline_bytes: usize,
}

/// Stores `plan` as [`Store::submit_from`] does, its inputs by reference when `offload` is
/// given and they are larger than its inline bound.
pub async fn submit(
    store: &Store,
    offload: Option<&Offload>,
    mut plan: Plan,
    trace_context: Option<&str>,
    mut origin: Origin,
) -> Result<Submitted, Error> {
    let written = write(offload, &mut plan, &mut origin).await?;
    let submitted = store.submit_from(&plan, trace_context, origin).await;
    if let (Some(offload), Some(key)) = (offload, &written)
        && !submitted.as_ref().is_ok_and(|s| s.created)
    {
        discard(offload, key).await;
    }
    Ok(submitted?)
}

/// Writes `plan`'s inputs to the store of `offload` when they are larger than its inline
/// bound: `plan` then holds their reference and `origin` the id of the run to store (under
/// whose prefix they lie). Returns the key written; the caller [`discard`]s it when no run is
/// made.
pub async fn write(offload: Option<&Offload>, plan: &mut Plan, origin: &mut Origin) -> Result<Option<Key>, Error> {
    let Some((offload, bytes)) = offload.and_then(|o| Some((o, beyond(&plan.inputs, o.inline_bytes)?))) else {
        return Ok(None);
    };
    let size = bytes.len();
    let run = Uuid::now_v7();
    let key = Key::inputs(run);
    let stored = offload
        .store
        .put(&key, reader_of(bytes), Some(INPUTS_MEDIA_TYPE))
        .await
        .map_err(|source| Error::Artifacts { bytes: size, source })?;
    tracing::info!(bytes = size, %run, "the run's inputs are beyond the inline bound; stored by reference");
    let descriptor = Descriptor {
        uri: stored.uri,
        size_bytes: stored.size_bytes,
        digest: stored.digest,
        media_type: stored.media_type,
    };
    plan.inputs = descriptor.reference();
    origin.run_id = Some(run);
    Ok(Some(key))
}

/// Deletes the inputs written for a run that was not made (nothing would ever prune them); a
/// failure is logged, not returned.
pub async fn discard(offload: &Offload, key: &Key) {
    if let Err(e) = offload.store.delete(std::slice::from_ref(key)).await {
        tracing::warn!(error = %e, key = key.as_str(), "the inputs of a run that was not stored could not be deleted");
    }
}

/// `inputs` serialised, when that is larger than `inline_bytes`.
fn beyond(inputs: &serde_json::Value, inline_bytes: usize) -> Option<Vec<u8>> {
    serde_json::to_vec(inputs).ok().filter(|bytes| bytes.len() > inline_bytes)
}
