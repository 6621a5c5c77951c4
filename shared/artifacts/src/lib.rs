//! rara's artifact store: artifacts and outputs above the inline bound, streamed to one place
//! (`RARA_ARTIFACTS_URI`: `s3://bucket/prefix` or `file:///dir`) with their sha256 computed
//! while they are written; Postgres keeps references (DESIGN.md "Artifacts and large values").
//!
//! # Layout
//!
//! - [`location`]: `RARA_ARTIFACTS_URI` parsed, the key layout (`runs/{run}/{step}/{attempt}/…`)
//!   and the check that a URI lies inside the store (anything else is never read or served).
//! - [`port`]: the [`ArtifactStore`] trait, [`Stored`] (size, digest) and [`Error`].
//! - [`digest`]: sha256 as it streams, `sha256:<hex>`.
//! - [`mod@file`]: the directory store (a temporary file renamed into place).
//! - [`s3`]: the S3 adapter (multipart beyond one part, presigned GETs, batched deletes).

pub mod digest;
pub mod file;
pub mod location;
pub mod port;
pub mod s3;

use std::sync::Arc;

pub use location::{Key, Location};
pub use port::{ArtifactStore, Error, Reader, Stored};

/// Default `RARA_INLINE_OUTPUT_BYTES`: an output or a run's inputs larger than this (serialised)
/// are written to the store and Postgres keeps a reference.
pub const DEFAULT_INLINE_BYTES: usize = 64 * 1024;

/// The store `uri` names: a directory for `file://`, S3 for `s3://` (with `s3`, a client the
/// caller built: the platform's records its calls for the IAM check).
pub fn open(uri: &str, s3: impl FnOnce() -> aws_sdk_s3::Client) -> Result<Arc<dyn ArtifactStore>, Error> {
    match Location::parse(uri)? {
        Location::Dir { root } => Ok(Arc::new(file::FileStore::new(root))),
        location @ Location::S3 { .. } => Ok(Arc::new(s3::S3Store::new(s3(), location))),
    }
}
