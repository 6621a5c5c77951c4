//! The console's live channel (`rara_console`, migrations 000009 and 000010): every statement
//! that changes steps' status or progress notifies each run it touched, once; a heartbeat
//! notifies nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use rara_store::Store;
use rara_store::browse::CONSOLE_CHANNEL;
use sqlx::PgPool;
use sqlx::postgres::PgListener;

/// The payloads delivered until the channel has been quiet for a moment.
async fn drain(listener: &mut PgListener) -> Vec<String> {
    let mut payloads = Vec::new();
    while let Ok(Ok(Some(n))) = tokio::time::timeout(Duration::from_millis(300), listener.try_recv()).await {
        payloads.push(n.payload().to_owned());
    }
    payloads
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn each_batch_statement_notifies_each_run_it_changed_once(pool: PgPool) {
    let store = Store::new(pool.clone());
    let first = store.submit(&flat_plan(10)).await.unwrap().run_id;
    let second = store.submit(&flat_plan(5)).await.unwrap().run_id;
    let runs: BTreeSet<String> = [first.to_string(), second.to_string()].into();

    let mut listener = PgListener::connect_with(&pool).await.unwrap();
    listener.listen(CONSOLE_CHANNEL).await.unwrap();

    let leased = store.lease_due("scheduler", 15, LEASE).await.unwrap();
    assert_eq!(leased.len(), 15);
    let lease = drain(&mut listener).await;
    assert_eq!(lease.len(), 2, "one notification per run for the lease of 15 steps: {lease:?}");
    assert_eq!(lease.into_iter().collect::<BTreeSet<_>>(), runs);

    let claimed = claim_all(&store, "executor", &leased).await;
    let claim = drain(&mut listener).await;
    assert_eq!(claim.into_iter().collect::<BTreeSet<_>>(), runs, "the claim notifies both runs, once each");

    store.heartbeat(&claimed[0].holder, LEASE).await.unwrap();
    assert_eq!(drain(&mut listener).await, Vec::<String>::new(), "a heartbeat changes no status");

    let items: Vec<_> = claimed.iter().map(|c| (c.holder.clone(), serde_json::json!({}))).collect();
    assert!(store.succeed(&items).await.unwrap().iter().all(Result::is_ok));
    let outcome = drain(&mut listener).await;
    assert_eq!(outcome.len(), 2, "the steps and their runs changed: one notification per run: {outcome:?}");
    assert_eq!(outcome.into_iter().collect::<BTreeSet<_>>(), runs);
}
