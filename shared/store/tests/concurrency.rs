//! Several leasers and claimers in parallel over thousands of due steps, with every
//! message delivered twice: every step is leased once, claimed once, run once, none lost.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use common::*;
use rara_store::Store;
use rara_store::claim::{ClaimOutcome, ClaimRequest};
use sqlx::PgPool;
use tokio::sync::{Mutex, mpsc};

const STEPS: usize = 3000;
const LEASERS: usize = 3;
const CLAIMERS: usize = 4;

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn parallel_leasers_and_claimers_run_every_step_exactly_once(pool: PgPool) {
    let store = Store::new(pool.clone());
    for _ in 0..3 {
        store.submit(&flat_plan(STEPS / 3)).await.unwrap();
    }

    let (tx, rx) = mpsc::unbounded_channel::<ClaimRequest>();
    let rx = Arc::new(Mutex::new(rx));
    let leases = Arc::new(Mutex::new(HashMap::<uuid::Uuid, usize>::new()));

    let mut leasers = Vec::new();
    for l in 0..LEASERS {
        let (store, tx, leases) = (store.clone(), tx.clone(), leases.clone());
        leasers.push(tokio::spawn(async move {
            loop {
                let batch = store.lease_due(&format!("scheduler-{l}"), 50, LEASE).await.unwrap();
                if batch.is_empty() {
                    break;
                }
                let mut seen = leases.lock().await;
                for leased in &batch {
                    *seen.entry(leased.step_id).or_default() += 1;
                    // At-least-once delivery: every message arrives twice.
                    tx.send(request(leased)).unwrap();
                    tx.send(request(leased)).unwrap();
                }
            }
        }));
    }
    drop(tx);

    let mut claimers = Vec::new();
    for c in 0..CLAIMERS {
        let (store, rx) = (store.clone(), rx.clone());
        claimers.push(tokio::spawn(async move {
            let worker = format!("executor-{c}");
            let mut ran = Vec::new();
            loop {
                let mut batch = Vec::new();
                {
                    let mut rx = rx.lock().await;
                    while batch.len() < 10 {
                        match rx.recv().await {
                            Some(r) => batch.push(r),
                            None => break,
                        }
                        if rx.is_empty() {
                            break;
                        }
                    }
                }
                if batch.is_empty() {
                    return ran;
                }
                let claimed: Vec<_> = store
                    .claim(&worker, &batch, LEASE)
                    .await
                    .unwrap()
                    .into_iter()
                    .filter_map(|o| match o {
                        ClaimOutcome::Claimed(step) => Some(*step),
                        _ => None,
                    })
                    .collect();
                let items: Vec<_> =
                    claimed.iter().map(|s| (s.holder.clone(), serde_json::json!({"by": worker}))).collect();
                if !items.is_empty() {
                    for result in store.succeed(&items).await.unwrap() {
                        result.unwrap();
                    }
                }
                ran.extend(claimed.into_iter().map(|s| s.holder.step_id));
            }
        }));
    }
    for l in leasers {
        l.await.unwrap();
    }
    let mut ran = Vec::new();
    for c in claimers {
        ran.extend(c.await.unwrap());
    }

    let leases = leases.lock().await;
    assert_eq!(leases.len(), STEPS, "every step was leased");
    assert!(leases.values().all(|&n| n == 1), "no step was leased twice");
    let unique: std::collections::HashSet<_> = ran.iter().collect();
    assert_eq!(ran.len(), STEPS, "every step ran once, duplicates ran nothing");
    assert_eq!(unique.len(), STEPS);

    let (succeeded, attempts, one_attempt): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM steps WHERE status = 'succeeded'),
                (SELECT count(*) FROM step_attempts),
                (SELECT count(*) FROM steps WHERE attempt = 1)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((succeeded, attempts, one_attempt), (STEPS as i64, STEPS as i64, STEPS as i64));
    let finished_runs: i64 = sqlx::query_scalar("SELECT count(*) FROM workflow_runs WHERE status = 'succeeded'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(finished_runs, 3);
}
