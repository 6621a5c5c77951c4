//! The directory store (`file:///dir`): a local run and tests. A body is written to a
//! temporary file beside its key and renamed into place, so a reader never sees half of one.

use std::path::PathBuf;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::digest::Running;
use crate::location::{Key, Location};
use crate::port::{ArtifactStore, Error, Reader, Stored};

/// How much of a body is held at a time while it is copied.
const CHUNK: usize = 256 * 1024;

#[derive(Debug, Clone)]
pub struct FileStore {
    location: Location,
    root: PathBuf,
}

impl FileStore {
    /// A store in the directory `root` (created as needed).
    pub fn new(root: PathBuf) -> Self {
        FileStore { location: Location::Dir { root: root.clone() }, root }
    }

    fn path(&self, key: &Key) -> PathBuf {
        self.root.join(key.as_str())
    }
}

fn io<'a>(op: &'static str, key: &'a Key) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |source| match source.kind() {
        std::io::ErrorKind::NotFound if op == "open" => Error::NotFound { key: key.as_str().to_owned() },
        _ => Error::Io { op, key: key.as_str().to_owned(), source },
    }
}

#[async_trait::async_trait]
impl ArtifactStore for FileStore {
    fn location(&self) -> &Location {
        &self.location
    }

    async fn put(&self, key: &Key, mut body: Reader, media_type: Option<&str>) -> Result<Stored, Error> {
        let path = self.path(key);
        if let Some(dir) = path.parent() {
            tokio::fs::create_dir_all(dir).await.map_err(io("create directory for", key))?;
        }
        let partial = path.with_extension(format!("partial-{}", uuid::Uuid::new_v4().simple()));
        let mut file = tokio::fs::File::create(&partial).await.map_err(io("create", key))?;
        let mut running = Running::default();
        let mut buffer = vec![0u8; CHUNK];
        let copied = async {
            loop {
                let n = body.read(&mut buffer).await.map_err(io("read the body for", key))?;
                if n == 0 {
                    break;
                }
                running.update(&buffer[..n]);
                file.write_all(&buffer[..n]).await.map_err(io("write", key))?;
            }
            file.sync_all().await.map_err(io("sync", key))?;
            tokio::fs::rename(&partial, &path).await.map_err(io("rename into", key))
        }
        .await;
        if let Err(e) = copied {
            let _ = tokio::fs::remove_file(&partial).await;
            return Err(e);
        }
        let (size_bytes, digest) = running.finish();
        Ok(Stored { uri: self.uri(key), size_bytes, digest, media_type: media_type.map(str::to_owned) })
    }

    async fn get(&self, key: &Key) -> Result<Reader, Error> {
        let file = tokio::fs::File::open(self.path(key)).await.map_err(io("open", key))?;
        Ok(Box::pin(file))
    }

    async fn presign(&self, _: &Key, _: Duration) -> Result<Option<String>, Error> {
        Ok(None)
    }

    async fn list(&self, prefix: &Key, limit: usize) -> Result<Vec<Key>, Error> {
        // Keys are relative paths of regular files; a prefix ending in `/` is a directory.
        let start = self.path(prefix);
        let mut keys = Vec::new();
        let mut pending = vec![start];
        while let Some(dir) = pending.pop() {
            let mut entries = match tokio::fs::read_dir(&dir).await {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => return Err(Error::Io { op: "list", key: prefix.as_str().to_owned(), source }),
            };
            while let Some(entry) = entries.next_entry().await.map_err(io("list", prefix))? {
                let path = entry.path();
                if entry.file_type().await.map_err(io("list", prefix))?.is_dir() {
                    pending.push(path);
                } else if let Some(key) = path.strip_prefix(&self.root).ok().and_then(|p| p.to_str()) {
                    keys.push(Key::from_listed(key));
                    if keys.len() >= limit {
                        return Ok(keys);
                    }
                }
            }
        }
        Ok(keys)
    }

    async fn delete(&self, keys: &[Key]) -> Result<(), Error> {
        for key in keys {
            match tokio::fs::remove_file(self.path(key)).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(Error::Io { op: "delete", key: key.as_str().to_owned(), source }),
            }
        }
        Ok(())
    }
}
