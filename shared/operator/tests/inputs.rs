//! A submission's large inputs by reference ([`rara_operator::inputs`]) on a real Postgres and a
//! directory store: written under the new run's prefix, the run keeping the reference; the same
//! idempotency key and inputs find that run and leave no second object; a store that cannot be
//! written stores nothing; without a store, or within the bound, the inputs stay inline.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rara_artifacts::Key;
use rara_artifacts::file::FileStore;
use rara_domain::config::Config;
use rara_domain::stored::Descriptor;
use rara_domain::workflow::{Format, Plan, WorkflowDefinition};
use rara_operator::inputs::{self, Offload};
use rara_store::Store;
use rara_store::submit::Origin;
use serde_json::json;
use sqlx::PgPool;

const FLOW: &str = "name: big\nidempotency_key: big-1\ninputs: {text: {type: string}}\n\
                    steps: [{name: a, operation: noop, input: {t: {$input: /text}}}]\n";

fn plan(text: &str) -> Plan {
    let config = Config::from_lookup("test", |_| None).unwrap();
    let given = json!({"text": text});
    WorkflowDefinition::parse(FLOW, Format::Yaml)
        .unwrap()
        .plan_for(&config, given.as_object().unwrap(), |_, _| false)
        .unwrap()
}

fn store_in(root: &Path) -> Offload {
    Offload { store: Arc::new(FileStore::new(root.to_path_buf())), inline_bytes: 100 }
}

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rara-inputs-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn runs(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM workflow_runs").fetch_one(pool).await.unwrap()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn inputs_beyond_the_bound_are_stored_once_by_reference(pool: PgPool) {
    let store = Store::new(pool.clone());
    let dir = scratch();
    let offload = store_in(&dir);
    let text = "x".repeat(1000);
    let made = inputs::submit(&store, Some(&offload), plan(&text), None, Origin::default()).await.unwrap();
    assert!(made.created);
    let kept = store.run_inputs(made.run_id).await.unwrap();
    let descriptor = Descriptor::of(&kept).expect("a reference");
    assert_eq!(offload.store.location().key_of(&descriptor.uri).unwrap(), Key::inputs(made.run_id));
    let bytes = offload.store.read_verified(&Key::inputs(made.run_id), Some(&descriptor.digest), 1 << 20).await;
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&bytes.unwrap()).unwrap(), json!({"text": text}));

    // The same key and inputs: the same run, and the object written for nothing is gone.
    let again = inputs::submit(&store, Some(&offload), plan(&text), None, Origin::default()).await.unwrap();
    assert_eq!((again.run_id, again.created), (made.run_id, false));
    assert_eq!(offload.store.list(&Key::runs(), 10).await.unwrap(), [Key::inputs(made.run_id)]);
    // Other inputs under the key: a conflict, and nothing left behind either.
    let other = inputs::submit(&store, Some(&offload), plan(&"y".repeat(1000)), None, Origin::default()).await;
    assert!(matches!(other, Err(inputs::Error::Store(rara_store::Error::IdempotencyConflict { .. }))), "{other:?}");
    assert_eq!(offload.store.list(&Key::runs(), 10).await.unwrap(), [Key::inputs(made.run_id)]);
    std::fs::remove_dir_all(dir).unwrap();
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_store_that_cannot_be_written_stores_nothing_and_small_inputs_stay_inline(pool: PgPool) {
    let store = Store::new(pool.clone());
    // A file where the store's directory should be: nothing can be written under it.
    let dir = scratch();
    let blocked = dir.join("file");
    std::fs::write(&blocked, b"not a directory").unwrap();
    let unwritable = store_in(&blocked);
    let failed = inputs::submit(&store, Some(&unwritable), plan(&"x".repeat(1000)), None, Origin::default()).await;
    let error = failed.unwrap_err();
    let size = json!({"text": "x".repeat(1000)}).to_string().len();
    assert!(matches!(error, inputs::Error::Artifacts { bytes, .. } if bytes == size), "{error:?}");
    assert!(error.to_string().contains("beyond RARA_INLINE_OUTPUT_BYTES"), "{error}");
    assert_eq!(runs(&pool).await, 0);

    // Within the bound, or without a store: inline.
    let small = inputs::submit(&store, Some(&unwritable), plan("hi"), None, Origin::default()).await.unwrap();
    assert_eq!(store.run_inputs(small.run_id).await.unwrap(), json!({"text": "hi"}));
    let mut unkeyed = plan(&"z".repeat(1000));
    unkeyed.idempotency_key = None;
    let inline = inputs::submit(&store, None, unkeyed, None, Origin::default()).await.unwrap();
    assert_eq!(store.run_inputs(inline.run_id).await.unwrap(), json!({"text": "z".repeat(1000)}));
    std::fs::remove_dir_all(dir).unwrap();
}
