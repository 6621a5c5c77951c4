//! One suite for both stores (the directory and S3 on LocalStack): a streamed write's size and
//! digest, a multipart write past one part, reads, listing, batched and idempotent deletes
//! under a run's prefix, and a presigned URL that downloads the object without credentials.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use rara_artifacts::port::reader_of;
use rara_artifacts::{ArtifactStore, Error, Key};
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;
use uuid::Uuid;

fn dir_store() -> Arc<dyn ArtifactStore> {
    let dir = std::env::temp_dir().join(format!("rara-artifacts-{}", Uuid::new_v4().simple()));
    rara_artifacts::open(&format!("file://{}", dir.display()), || unreachable!("no S3 for a directory")).unwrap()
}

/// Bytes that are not all alike (a digest of zeros proves little).
fn bytes(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect()
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn read_all(store: &dyn ArtifactStore, key: &Key) -> Vec<u8> {
    let mut out = Vec::new();
    store.get(key).await.unwrap().read_to_end(&mut out).await.unwrap();
    out
}

async fn suite(store: Arc<dyn ArtifactStore>) {
    let (run, step) = (Uuid::new_v4(), Uuid::new_v4());
    // A small body: one write.
    let small = Key::artifact(run, step, 1, "small.json").unwrap();
    let stored = store.put(&small, reader_of(b"{\"a\":1}".to_vec()), Some("application/json")).await.unwrap();
    assert_eq!((stored.size_bytes, stored.digest.as_str()), (7, sha256(b"{\"a\":1}").as_str()));
    assert_eq!(store.location().key_of(&stored.uri).unwrap(), small, "the URI names the key");
    assert_eq!(read_all(&*store, &small).await, b"{\"a\":1}");

    // Past one S3 part (8 MiB): a multipart upload; the digest is the whole body's.
    let body = bytes(20 * 1024 * 1024 + 123);
    let large = Key::artifact(run, step, 2, "large.bin").unwrap();
    let stored = store.put(&large, reader_of(body.clone()), None).await.unwrap();
    assert_eq!((stored.size_bytes, stored.digest.clone()), (body.len() as u64, sha256(&body)));
    assert!(read_all(&*store, &large).await == body, "the object reads back whole");
    let verified = store.read_verified(&large, Some(&stored.digest), body.len() as u64).await.unwrap();
    assert_eq!(verified.len(), body.len());
    let wrong = store.read_verified(&large, Some(&sha256(b"other")), body.len() as u64).await;
    assert!(matches!(wrong, Err(Error::Digest { .. })), "{wrong:?}");
    let bounded = store.read_verified(&large, None, 1024).await;
    assert!(matches!(bounded, Err(Error::TooLarge { bound: 1024, .. })), "{bounded:?}");

    // Another run's object is not under this run's prefix.
    let other = Key::output(Uuid::new_v4(), step, 1);
    store.put(&other, reader_of(b"{}".to_vec()), None).await.unwrap();
    let mut listed = store.list(&Key::run(run), 100).await.unwrap();
    listed.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    let mut expected = vec![small.clone(), large.clone()];
    expected.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    assert_eq!(listed, expected);

    assert_eq!(store.delete_under(&Key::run(run)).await.unwrap(), 2);
    assert_eq!(store.delete_under(&Key::run(run)).await.unwrap(), 0, "a second delete finds nothing");
    assert!(matches!(store.get(&small).await, Err(Error::NotFound { .. })));
    assert_eq!(read_all(&*store, &other).await, b"{}", "the other run's object stays");
}

#[tokio::test]
async fn the_directory_store_passes_the_suite() {
    let store = dir_store();
    suite(store.clone()).await;
    let key = Key::output(Uuid::new_v4(), Uuid::new_v4(), 1);
    assert_eq!(store.presign(&key, Duration::from_secs(60)).await.unwrap(), None, "a directory is streamed");
}

#[tokio::test]
async fn the_s3_store_on_localstack_passes_the_suite() {
    let (store, _) = rara_testkit::s3_store("some/prefix").await;
    suite(store).await;
}

#[tokio::test]
async fn a_presigned_s3_url_downloads_the_object_without_credentials_until_it_expires() {
    let (store, uri) = rara_testkit::s3_store("").await;
    let key = Key::artifact(Uuid::new_v4(), Uuid::new_v4(), 1, "report.txt").unwrap();
    store.put(&key, reader_of(b"hello".to_vec()), Some("text/plain")).await.unwrap();
    let url = store.presign(&key, Duration::from_secs(60)).await.unwrap().expect("S3 presigns");
    assert!(url.contains("X-Amz-Signature="), "{url}");
    assert!(url.contains(uri.trim_start_matches("s3://")), "{url} names the bucket");
    let response = reqwest::get(&url).await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    assert_eq!(response.bytes().await.unwrap().as_ref(), b"hello");
}
