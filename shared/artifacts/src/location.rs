//! Where the store is (`RARA_ARTIFACTS_URI`) and where each thing goes in it. One layout for
//! rara and its executors:
//!
//! | what | key |
//! | --- | --- |
//! | an artifact of an attempt | `runs/{run}/{step}/{attempt}/{name}` |
//! | an attempt's offloaded output | `runs/{run}/{step}/{attempt}.output.json` |
//! | a run's offloaded inputs | `runs/{run}/inputs.json` |
//!
//! so everything of a run lies under `runs/{run}/`, which pruning deletes. A URI is read or
//! served only when it lies inside the store ([`Location::key_of`]): an executor may report any
//! URI, and `file:///etc/passwd` must stay a name.

use std::path::{Path, PathBuf};

use uuid::Uuid;

use crate::Error;

/// The longest artifact name (bytes), as `rara_remote::bounds::MAX_ARTIFACT_NAME_BYTES`.
pub const MAX_NAME_BYTES: usize = 256;

/// `RARA_ARTIFACTS_URI`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// `file:///dir`: an absolute directory.
    Dir { root: PathBuf },
    /// `s3://bucket[/prefix]`: the prefix without leading or trailing `/` (maybe empty).
    S3 { bucket: String, prefix: String },
}

/// A key inside the store: `/`-separated segments, none empty, `.` or `..`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key(String);

impl Key {
    /// The artifact `name` of an attempt. A name is 1 to 256 bytes of `A-Z a-z 0-9 . _ -`,
    /// not starting with `.`.
    pub fn artifact(run: Uuid, step: Uuid, attempt: u32, name: &str) -> Result<Key, Error> {
        check_name(name)?;
        Ok(Key(format!("runs/{run}/{step}/{attempt}/{name}")))
    }

    /// The offloaded output of an attempt.
    pub fn output(run: Uuid, step: Uuid, attempt: u32) -> Key {
        Key(format!("runs/{run}/{step}/{attempt}.output.json"))
    }

    /// The offloaded inputs of a run.
    pub fn inputs(run: Uuid) -> Key {
        Key(format!("runs/{run}/inputs.json"))
    }

    /// The prefix every run's objects lie under.
    pub fn runs() -> Key {
        Key("runs/".to_owned())
    }

    /// The prefix everything of the run `run` lies under.
    pub fn run(run: Uuid) -> Key {
        Key(format!("runs/{run}/"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the key belongs to the run `run`.
    pub fn is_of_run(&self, run: Uuid) -> bool {
        self.0.starts_with(Key::run(run).as_str())
    }

    /// A key as the store listed it (trusted: it came from the store, not from a caller).
    pub(crate) fn from_listed(key: &str) -> Key {
        Key(key.to_owned())
    }

    fn parse(key: &str) -> Option<Key> {
        let safe = !key.is_empty()
            && key.len() <= 1024
            && key.split('/').all(|s| !s.is_empty() && s != "." && s != "..")
            && !key.contains(['\\', '\0', '?', '#']);
        safe.then(|| Key(key.to_owned()))
    }
}

fn check_name(name: &str) -> Result<(), Error> {
    let reason = if name.is_empty() || name.len() > MAX_NAME_BYTES {
        Some(format!("must be 1 to {MAX_NAME_BYTES} bytes"))
    } else if name.starts_with('.') {
        Some("must not start with `.`".into())
    } else if !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')) {
        Some("may hold only A-Z, a-z, 0-9, `.`, `_` and `-`".into())
    } else {
        None
    };
    reason.map_or(Ok(()), |reason| Err(Error::Name { name: name.chars().take(64).collect(), reason }))
}

impl Location {
    pub fn parse(uri: &str) -> Result<Location, Error> {
        let invalid = |reason: &str| Error::Config { uri: uri.to_owned(), reason: reason.to_owned() };
        if let Some(path) = uri.strip_prefix("file://") {
            let root = Path::new(path.trim_end_matches('/'));
            if !root.is_absolute() || path.split('/').any(|s| s == "..") {
                return Err(invalid("a file:// store needs an absolute directory, e.g. file:///var/lib/rara"));
            }
            return Ok(Location::Dir { root: root.to_path_buf() });
        }
        if let Some(rest) = uri.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            let bucket_ok = (3..=63).contains(&bucket.len())
                && bucket.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-');
            if !bucket_ok {
                return Err(invalid("the bucket must be 3 to 63 of a-z, 0-9, `.` and `-`"));
            }
            let prefix = prefix.trim_matches('/');
            if !prefix.is_empty() && Key::parse(prefix).is_none() {
                return Err(invalid("the prefix must be `/`-separated names, none empty, `.` or `..`"));
            }
            return Ok(Location::S3 { bucket: bucket.to_owned(), prefix: prefix.to_owned() });
        }
        Err(invalid("expected s3://bucket/prefix or file:///dir"))
    }

    /// The URI of `key`.
    pub fn uri(&self, key: &Key) -> String {
        match self {
            Location::Dir { root } => format!("file://{}/{}", root.display(), key.0),
            Location::S3 { bucket, .. } => format!("s3://{bucket}/{}", self.object(key)),
        }
    }

    /// The S3 object key (or path below the root) of `key`, the store's prefix included.
    pub fn object(&self, key: &Key) -> String {
        match self {
            Location::S3 { prefix, .. } if !prefix.is_empty() => format!("{prefix}/{}", key.0),
            _ => key.0.clone(),
        }
    }

    /// The key of `uri` when it lies inside the store, else [`Error::Foreign`].
    pub fn key_of(&self, uri: &str) -> Result<Key, Error> {
        let base = match self {
            Location::Dir { root } => format!("file://{}/", root.display()),
            Location::S3 { bucket, prefix } if prefix.is_empty() => format!("s3://{bucket}/"),
            Location::S3 { bucket, prefix } => format!("s3://{bucket}/{prefix}/"),
        };
        uri.strip_prefix(&base)
            .and_then(Key::parse)
            .ok_or_else(|| Error::Foreign { uri: uri.chars().take(256).collect() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_and_file_uris_parse_and_round_trip_their_keys() {
        let run = Uuid::nil();
        let key = Key::artifact(run, run, 2, "report.json").unwrap();
        for (uri, expected) in [
            ("s3://bucket/some/prefix/", "s3://bucket/some/prefix/runs/"),
            ("s3://bucket", "s3://bucket/runs/"),
            ("file:///var/lib/rara/", "file:///var/lib/rara/runs/"),
        ] {
            let location = Location::parse(uri).unwrap();
            let full = location.uri(&key);
            assert!(full.starts_with(expected), "{full}");
            assert_eq!(location.key_of(&full).unwrap(), key);
        }
    }

    #[test]
    fn uris_outside_the_store_or_climbing_out_of_it_are_foreign() {
        let location = Location::parse("file:///data/artifacts").unwrap();
        for uri in [
            "file:///etc/passwd",
            "file:///data/artifacts/../secrets",
            "file:///data/artifacts/runs//x",
            "file:///data/artifactsX/runs/x",
            "s3://data/artifacts/runs/x",
        ] {
            assert!(matches!(location.key_of(uri), Err(Error::Foreign { .. })), "{uri}");
        }
        let s3 = Location::parse("s3://bucket/p").unwrap();
        assert!(s3.key_of("s3://bucket/other/x").is_err());
        assert!(s3.key_of("s3://bucket/p/runs/x").is_ok());
    }

    #[test]
    fn bad_store_uris_and_artifact_names_are_refused_with_the_reason() {
        for uri in ["file://relative/dir", "http://x", "s3://B", "s3://bucket/a/../b", "file:///a/../b"] {
            assert!(matches!(Location::parse(uri), Err(Error::Config { .. })), "{uri}");
        }
        for name in ["", ".hidden", "a/b", "..", "x y", &"n".repeat(300)] {
            assert!(matches!(Key::artifact(Uuid::nil(), Uuid::nil(), 1, name), Err(Error::Name { .. })), "{name}");
        }
    }
}
