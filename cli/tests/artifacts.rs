//! `rara artifact get`: downloads an artifact from LocalStack's S3 and verifies its digest; a
//! digest that does not match writes nothing; an unknown name is not found (exit 3). `rara prune`
//! deletes a run's objects after its rows, and retries them when the store was unreachable.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use rara_artifacts::Key;
use rara_artifacts::port::reader_of;
use uuid::Uuid;

#[test]
fn an_artifact_is_downloaded_and_verified_and_a_wrong_digest_writes_nothing() {
    let db = ScratchDb::new();
    assert!(db.rara(&["migrate"]).status.success());
    let dir = tempdir();
    let file = write(&dir, "one.yaml", "name: one\nsteps:\n  - {name: make, operation: noop}\n");
    let out = db.rara(&["submit", &file]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run: Uuid = stdout(&out).trim().parse().unwrap();

    // An object of 3 MiB in a fresh bucket, reported by the step as `data.bin`, and the same
    // object reported as `bad.bin` with another digest.
    let body: Vec<u8> = (0..3 * 1024 * 1024u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let uri = runtime.block_on(async {
        let (store, uri) = rara_testkit::s3_store("cli").await;
        let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
        let step: Uuid = sqlx::query_scalar("SELECT id FROM steps WHERE run_id = $1").bind(run).fetch_one(&pool).await.unwrap();
        let key = Key::artifact(run, step, 1, "data.bin").unwrap();
        let stored = store.put(&key, reader_of(body.clone()), None).await.unwrap();
        for (name, digest) in [("data.bin", stored.digest.as_str()), ("bad.bin", "sha256:00")] {
            sqlx::query("INSERT INTO artifacts (step_id, attempt, fence, name, uri, size_bytes, digest) VALUES ($1, 1, 1, $2, $3, $4, $5)")
                .bind(step)
                .bind(name)
                .bind(&stored.uri)
                .bind(body.len() as i64)
                .bind(digest)
                .execute(&pool)
                .await
                .unwrap();
        }
        uri
    });
    let mut env = vec![
        ("AWS_ENDPOINT_URL", rara_testkit::endpoint()),
        ("AWS_ACCESS_KEY_ID", "test".into()),
        ("AWS_SECRET_ACCESS_KEY", "test".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("RARA_ARTIFACTS_URI", uri),
    ];
    let target = dir.join("data.bin");
    let run = run.to_string();
    let out =
        db.rara_in(&env, &["--json", "artifact", "get", &run, "make", "data.bin", "-o", target.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!((report["verified"].as_bool(), report["size_bytes"].as_u64()), (Some(true), Some(body.len() as u64)));
    assert!(std::fs::read(&target).unwrap() == body, "the file holds the object");

    let bad = dir.join("bad.bin");
    let out = db.rara_in(&env, &["artifact", "get", &run, "make", "bad.bin", "-o", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("not the recorded sha256:00"), "{}", stderr(&out));
    assert!(!bad.exists() && !dir.join("bad.bin.partial").exists(), "nothing was written");

    let out = db.rara_in(&env, &["artifact", "get", &run, "make", "nothing"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    env.pop();
    let out = db.rara_in(&env, &["artifact", "get", &run, "make", "data.bin"]);
    assert_eq!(out.status.code(), Some(2), "without RARA_ARTIFACTS_URI: {}", stderr(&out));
}

/// The keys under the run's prefix in the store.
fn listed(runtime: &tokio::runtime::Runtime, store: &dyn rara_artifacts::ArtifactStore, run: Uuid) -> usize {
    runtime.block_on(store.list(&Key::run(run), 1000)).unwrap().len()
}

#[test]
fn prune_deletes_a_runs_objects_and_retries_them_when_the_store_was_unreachable() {
    let db = ScratchDb::new();
    assert!(db.rara(&["migrate"]).status.success());
    let dir = tempdir();
    let file = write(&dir, "one.yaml", "name: one\nsteps:\n  - {name: make, operation: noop}\n");
    let out = db.rara(&["submit", &file]);
    let run: Uuid = stdout(&out).trim().parse().unwrap();
    assert!(db.rara(&["cancel", &run.to_string()]).status.success());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // Three objects under the run (two artifacts and an offloaded output), one of another run.
    let (store, uri) = runtime.block_on(rara_testkit::s3_store("prune"));
    let other = Uuid::new_v4();
    runtime.block_on(async {
        for key in [
            Key::artifact(run, Uuid::new_v4(), 1, "a.bin").unwrap(),
            Key::artifact(run, Uuid::new_v4(), 2, "b.bin").unwrap(),
            Key::output(run, Uuid::new_v4(), 1),
            Key::output(other, Uuid::new_v4(), 1),
        ] {
            store.put(&key, reader_of(vec![7; 1000]), None).await.unwrap();
        }
    });
    assert_eq!(listed(&runtime, &*store, run), 3, "before");

    // S3 unreachable: the rows go, the objects stay queued.
    let aws = |endpoint: String| {
        vec![
            ("AWS_ENDPOINT_URL", endpoint),
            ("AWS_ACCESS_KEY_ID", "test".to_owned()),
            ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
            ("AWS_REGION", "us-east-1".to_owned()),
            ("AWS_MAX_ATTEMPTS", "1".to_owned()),
            ("RARA_ARTIFACTS_URI", uri.clone()),
        ]
    };
    let out = db.rara_in(&aws("http://127.0.0.1:9".into()), &["--json", "prune", "--older-than", "0s"]);
    assert!(out.status.success(), "the prune of rows does not wait for the store: {}", stderr(&out));
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!((report["runs"].as_u64(), report["objects"]["failed"].as_u64()), (Some(1), Some(1)), "{report}");
    assert_eq!(db.rara(&["status", &run.to_string()]).status.code(), Some(3), "the run's rows are gone");
    assert_eq!(listed(&runtime, &*store, run), 3, "the objects are still there");

    // The next prune, with S3 back, deletes them; the other run's object stays.
    let out = db.rara_in(&aws(rara_testkit::endpoint()), &["--json", "prune", "--older-than", "0s"]);
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(report["objects"], serde_json::json!({"runs": 1, "objects": 3, "failed": 0}), "{report}");
    assert_eq!(listed(&runtime, &*store, run), 0, "after");
    assert_eq!(listed(&runtime, &*store, other), 1, "another run's object stays");
    let out = db.rara_in(&aws(rara_testkit::endpoint()), &["--json", "prune", "--older-than", "0s"]);
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(report["objects"], serde_json::json!({"runs": 0, "objects": 0, "failed": 0}), "nothing left: {report}");
}
