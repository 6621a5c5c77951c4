//! The history checker's limit invariant can fail: three attempts of a key with a limit of 2
//! running at once (written past the lease, as a broken store would) break it; two do not.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use rara_domain::config::Config;
use rara_domain::workflow::{Format, WorkflowDefinition};
use rara_store::Store;
use rara_store::claim::{ClaimOutcome, ClaimRequest};
use rara_testkit::history::{self, Ledger};
use sqlx::PgPool;

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_checker_reports_a_key_over_its_limit(pool: PgPool) {
    let store = Store::new(pool.clone());
    let yaml = "name: k\nsteps:\n\
                - {name: a, operation: noop, concurrency: {key: tenant-a, limit: 2}}\n\
                - {name: b, operation: noop, concurrency: {key: tenant-a, limit: 2}}\n\
                - {name: c, operation: noop, concurrency: {key: tenant-a, limit: 2}}\n";
    let config = Config::from_lookup("test", |_| None).unwrap();
    store.submit(&WorkflowDefinition::parse(yaml, Format::Yaml).unwrap().plan(&config).unwrap()).await.unwrap();
    let lease = Duration::from_secs(60);
    let claim_all = |leased: Vec<rara_store::lease::Leased>| {
        let store = store.clone();
        async move {
            let requests: Vec<ClaimRequest> =
                leased.iter().map(|l| ClaimRequest { step_id: l.step_id, lease_token: l.lease_token }).collect();
            for outcome in store.claim("executor", &requests, lease).await.unwrap() {
                assert!(matches!(outcome, ClaimOutcome::Claimed(_)), "{outcome:?}");
            }
        }
    };

    let leased = store.lease_due("scheduler", 10, lease).await.unwrap();
    assert_eq!(leased.len(), 2, "the lease holds the key to 2");
    claim_all(leased).await;
    let clean = history::check(&pool, &Ledger::default()).await.unwrap();
    assert!(!clean.check().iter().any(|v| v.rule == "no key holds more than its limit"), "{:?}", clean.check());

    // A broken store: the third step leased past the limit, and claimed.
    sqlx::query("UPDATE steps SET concurrency_limit = NULL WHERE name = 'c'").execute(&pool).await.unwrap();
    let third = store.lease_due("scheduler", 10, lease).await.unwrap();
    assert_eq!(third.len(), 1);
    claim_all(third).await;
    sqlx::query("UPDATE steps SET concurrency_limit = 2 WHERE name = 'c'").execute(&pool).await.unwrap();
    let broken = history::check(&pool, &Ledger::default()).await.unwrap();
    let over: Vec<_> = broken.check().into_iter().filter(|v| v.rule == "no key holds more than its limit").collect();
    assert_eq!(over.len(), 1, "{over:?}");
    assert!(over[0].detail.contains("tenant-a ran 3 attempts"), "{}", over[0].detail);
}
