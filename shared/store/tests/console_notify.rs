//! The console's live channel (`rara_console`, migrations 000009, 000010 and 000013): while a
//! console listener is registered, every statement that changes steps' status or progress
//! notifies each run it touched, once, and a heartbeat notifies nothing; while none is, nothing
//! is notified at all.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use rara_store::Store;
use rara_store::browse::CONSOLE_CHANNEL;
use sqlx::PgPool;
use sqlx::postgres::PgListener;
use uuid::Uuid;

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
    assert!(store.register_console_listener(Uuid::new_v4(), Duration::from_secs(60)).await.unwrap());

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

/// Nothing is notified while no console listener is registered (the hot path pays nothing);
/// a registration turns notifications on (and says so once), its end or its lapse turns them
/// off again.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn changes_are_notified_only_while_a_console_listener_is_registered(pool: PgPool) {
    let store = Store::new(pool.clone());
    let run = store.submit(&flat_plan(3)).await.unwrap().run_id;
    let mut listener = PgListener::connect_with(&pool).await.unwrap();
    listener.listen(CONSOLE_CHANNEL).await.unwrap();

    // Nobody registered: a lease and a claim change statuses, and nothing is sent.
    let leased = store.lease_due("scheduler", 1, LEASE).await.unwrap();
    let claimed = claim_all(&store, "executor", &leased).await;
    assert_eq!(drain(&mut listener).await, Vec::<String>::new(), "notified with no console listening");

    let (server, other) = (Uuid::new_v4(), Uuid::new_v4());
    assert!(store.register_console_listener(server, Duration::from_secs(60)).await.unwrap(), "turned on");
    assert!(!store.register_console_listener(server, Duration::from_secs(60)).await.unwrap(), "a refresh");
    assert!(!store.register_console_listener(other, Duration::from_secs(60)).await.unwrap(), "already on");
    let items: Vec<_> = claimed.iter().map(|c| (c.holder.clone(), serde_json::json!({}))).collect();
    assert!(store.succeed(&items).await.unwrap().iter().all(Result::is_ok));
    assert_eq!(drain(&mut listener).await, vec![run.to_string()]);

    // One server ends its registration: the other still listens.
    store.unregister_console_listener(server).await.unwrap();
    store.lease_due("scheduler", 1, LEASE).await.unwrap();
    assert_eq!(drain(&mut listener).await, vec![run.to_string()]);

    // The other's registration lapses: nothing again, and registering turns it back on.
    store.register_console_listener(other, Duration::from_millis(1)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    store.lease_due("scheduler", 1, LEASE).await.unwrap();
    assert_eq!(drain(&mut listener).await, Vec::<String>::new(), "notified after the registration lapsed");
    assert!(store.register_console_listener(server, Duration::from_secs(60)).await.unwrap(), "turned on again");
}

/// Whether each of the console's triggers is enabled, by name.
async fn console_triggers(pool: &PgPool) -> Vec<(String, bool)> {
    sqlx::query_as(
        "SELECT tgname::text, tgenabled <> 'D' FROM pg_trigger
         WHERE tgname IN ('steps_console_notify', 'workflow_runs_console_notify_insert',
                          'workflow_runs_console_notify_update')
         ORDER BY tgname",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

fn all(enabled: bool) -> Vec<(String, bool)> {
    ["steps_console_notify", "workflow_runs_console_notify_insert", "workflow_runs_console_notify_update"]
        .into_iter()
        .map(|name| (name.to_owned(), enabled))
        .collect()
}

/// The console's triggers run only while a console listens (migration 000016): off on a new
/// database, on with the first registration, off again when the last one ends, and, when a
/// registration lapses instead, at the scheduler's next check (`quiet_console`), which leaves
/// them on while any registration lasts.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_console_triggers_run_only_while_a_console_listens(pool: PgPool) {
    let store = Store::new(pool.clone());
    assert_eq!(console_triggers(&pool).await, all(false), "a new database runs no console trigger");
    assert!(!store.quiet_console().await.unwrap(), "nothing to turn off");

    let (first, second) = (Uuid::new_v4(), Uuid::new_v4());
    assert!(store.register_console_listener(first, Duration::from_secs(60)).await.unwrap());
    assert_eq!(console_triggers(&pool).await, all(true));
    assert!(!store.register_console_listener(second, Duration::from_secs(60)).await.unwrap(), "already on");
    store.unregister_console_listener(first).await.unwrap();
    assert_eq!(console_triggers(&pool).await, all(true), "the second still listens");
    assert!(!store.quiet_console().await.unwrap(), "the second still listens");
    store.unregister_console_listener(second).await.unwrap();
    assert_eq!(console_triggers(&pool).await, all(false), "the last one ended");

    // A registration that lapses (its console froze) leaves them on until the next check.
    assert!(store.register_console_listener(first, Duration::from_millis(1)).await.unwrap());
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(console_triggers(&pool).await, all(true));
    assert!(store.quiet_console().await.unwrap(), "turned off");
    assert_eq!(console_triggers(&pool).await, all(false));
}
