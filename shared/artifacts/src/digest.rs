//! The digest of a stream, computed as it is written: `sha256:<lowercase hex>`, the form the
//! `artifacts.digest` column and the `rara.v1` `Artifact.digest` field use.

use sha2::{Digest as _, Sha256};

/// A running sha256 and byte count.
#[derive(Debug, Default, Clone)]
pub struct Running {
    hasher: Sha256,
    size: u64,
}

impl Running {
    pub fn update(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
        self.size += bytes.len() as u64;
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// `(size, "sha256:<hex>")`.
    pub fn finish(self) -> (u64, String) {
        (self.size, format!("sha256:{}", hex::encode(self.hasher.finalize())))
    }
}

/// `sha256:<hex>` of `bytes`.
pub fn of(bytes: &[u8]) -> String {
    let mut running = Running::default();
    running.update(bytes);
    running.finish().1
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_digest_of_abc_is_the_published_one() {
        assert_eq!(super::of(b"abc"), "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
