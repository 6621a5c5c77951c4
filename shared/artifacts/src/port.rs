//! The artifact store as a port: the directory store and the S3 adapter implement it, the
//! runtime (offloaded outputs), the API (serving) and the CLI (pruning, `rara artifact get`)
//! hold it as `Arc<dyn ArtifactStore>`.

use std::pin::Pin;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::location::{Key, Location};

/// A byte stream read from (or written to) the store.
pub type Reader = Pin<Box<dyn AsyncRead + Send>>;

/// The most keys one batched delete names (S3's `DeleteObjects` limit).
pub const DELETE_BATCH: usize = 1000;

/// What was written: where, how many bytes, their digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stored {
    pub uri: String,
    pub size_bytes: u64,
    /// `sha256:<hex>`.
    pub digest: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
}

/// A failed store operation. Nothing here holds the bytes.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("RARA_ARTIFACTS_URI {uri:?}: {reason}")]
    Config { uri: String, reason: String },
    #[error("artifact name {name:?} {reason}")]
    Name { name: String, reason: String },
    #[error("{uri:?} is not inside the artifact store")]
    Foreign { uri: String },
    #[error("no object at {key}")]
    NotFound { key: String },
    #[error("the object at {key} is {actual}, not the recorded {expected}")]
    Digest { key: String, expected: String, actual: String },
    #[error("the object at {key} is larger than {bound} bytes")]
    TooLarge { key: String, bound: u64 },
    #[error("{op} {key}")]
    Io {
        op: &'static str,
        key: String,
        #[source]
        source: std::io::Error,
    },
    #[error("S3 {op} {key}")]
    S3 {
        op: &'static str,
        key: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl Error {
    /// Whether trying again later may succeed (the store was unreachable or failed), as
    /// opposed to a request that will never succeed (a bad name, a foreign URI, a digest).
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Io { .. } | Error::S3 { .. })
    }
}

/// The store. Every key is relative to [`location`](ArtifactStore::location).
#[async_trait::async_trait]
pub trait ArtifactStore: Send + Sync + std::fmt::Debug {
    fn location(&self) -> &Location;

    /// Streams `body` to `key` (replacing what was there), computing its sha256 as it goes;
    /// memory stays bounded by one part whatever the size. Nothing is visible at `key` until
    /// the whole body is written.
    async fn put(&self, key: &Key, body: Reader, media_type: Option<&str>) -> Result<Stored, Error>;

    /// The object at `key`, streamed ([`Error::NotFound`] when there is none).
    async fn get(&self, key: &Key) -> Result<Reader, Error>;

    /// A URL that downloads `key` without credentials until `ttl` has passed (S3), or `None`
    /// where the store cannot make one (a directory: the caller streams [`get`](Self::get)).
    async fn presign(&self, key: &Key, ttl: Duration) -> Result<Option<String>, Error>;

    /// The keys under `prefix` (at most `limit`).
    async fn list(&self, prefix: &Key, limit: usize) -> Result<Vec<Key>, Error>;

    /// Deletes `keys` (at most [`DELETE_BATCH`]); a key with no object is not an error.
    async fn delete(&self, keys: &[Key]) -> Result<(), Error>;

    /// The URI of `key` in this store.
    fn uri(&self, key: &Key) -> String {
        self.location().uri(key)
    }

    /// Deletes everything under `prefix`, a batch at a time; returns how many objects it deleted.
    /// Idempotent: a second call finds nothing and deletes nothing.
    async fn delete_under(&self, prefix: &Key) -> Result<u64, Error> {
        let mut deleted = 0u64;
        loop {
            let keys = self.list(prefix, DELETE_BATCH).await?;
            if keys.is_empty() {
                return Ok(deleted);
            }
            self.delete(&keys).await?;
            deleted += keys.len() as u64;
        }
    }

    /// The whole object at `key` when it holds at most `bound` bytes and, when `digest` is
    /// given, its sha256 is that digest.
    async fn read_verified(&self, key: &Key, digest: Option<&str>, bound: u64) -> Result<Vec<u8>, Error> {
        let reader = self.get(key).await?;
        let mut bytes = Vec::new();
        let read = reader.take(bound + 1).read_to_end(&mut bytes).await;
        read.map_err(|source| Error::Io { op: "read", key: key.as_str().to_owned(), source })?;
        if bytes.len() as u64 > bound {
            return Err(Error::TooLarge { key: key.as_str().to_owned(), bound });
        }
        let actual = crate::digest::of(&bytes);
        match digest {
            Some(expected) if expected != actual => {
                Err(Error::Digest { key: key.as_str().to_owned(), expected: expected.to_owned(), actual })
            }
            _ => Ok(bytes),
        }
    }
}

/// `bytes` as a [`Reader`] for [`ArtifactStore::put`].
pub fn reader_of(bytes: Vec<u8>) -> Reader {
    Box::pin(std::io::Cursor::new(bytes))
}
