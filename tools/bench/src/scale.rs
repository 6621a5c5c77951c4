//! `rara-bench scale`: does the hot path slow down as finished history piles up?
//!
//! On one scratch database, the claim (and the lease and the success) of fresh noop steps is
//! timed statement by statement twice: with `--history-small` finished steps in the tables
//! (default 10 thousand), then again after filling them up to `--history` (default 10
//! million). The history is written by the store's `testing` feature
//! ([`rara_store::testing::fill_history`]: finished steps as the store leaves them, in bulk,
//! so a fill of millions takes minutes), followed by `VACUUM ANALYZE` as autovacuum would.
//! Statistics are refreshed after every chunk of the fill, as autovacuum would during a
//! slower growth: the foreign-key checks of the inserts are planned from them.

use std::time::Duration;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use rara_domain::workflow::{StepDefinition, WorkflowDefinition};
use rara_store::claim::{ClaimOutcome, ClaimRequest};
use rara_store::{Store, testing};
use serde::Serialize;
use sqlx::PgPool;
use tokio::time::Instant;

use rara_testkit::scratch::ScratchDb;

use crate::report::{Latency, percentiles};
use crate::system;

/// History rows written per statement (one transaction each).
const FILL_CHUNK: u64 = 250_000;
/// Fresh steps timed at each history size, and the batch sizes of the Lambdas.
const PROBE_STEPS: usize = 3000;
const LEASE_BATCH: u32 = 100;
const CLAIM_BATCH: usize = 10;

#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub small: u64,
    pub large: u64,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub mode: &'static str,
    pub probe_steps: usize,
    pub claim_batch: usize,
    pub small: Probe,
    pub large: Probe,
    /// Claim p50 and p99 with the large history over those with the small one.
    pub claim_p50_ratio: f64,
    pub claim_p99_ratio: f64,
    pub fill_seconds: f64,
    pub load_average_1m: [f64; 2],
}

/// Latencies of one history size, per statement (milliseconds, client side).
#[derive(Debug, Serialize)]
pub struct Probe {
    pub finished_steps: u64,
    pub steps_table_mb: f64,
    pub claim_ms: Latency,
    pub lease_ms: Latency,
    pub succeed_ms: Latency,
}

pub async fn run(options: Options, scratch: &ScratchDb) -> anyhow::Result<Report> {
    let pool = system::pool(&scratch.connect_options(), 1).await.context("cannot connect to the scratch database")?;
    let report = measure(options, &pool, &Store::new(pool.clone())).await;
    pool.close().await;
    report
}

async fn measure(options: Options, pool: &PgPool, store: &Store) -> anyhow::Result<Report> {
    let load_before = system::load_average();
    fill(pool, 0, options.small).await?;
    let small = probe(pool, store, options.small).await?;
    let started = Instant::now();
    fill(pool, options.small, options.large).await?;
    let fill_seconds = started.elapsed().as_secs_f64();
    // The first probe's steps finished too: count them as history.
    let large = probe(pool, store, options.large + PROBE_STEPS as u64).await?;
    Ok(Report {
        mode: "scale",
        probe_steps: PROBE_STEPS,
        claim_batch: CLAIM_BATCH,
        claim_p50_ratio: large.claim_ms.p50 / small.claim_ms.p50,
        claim_p99_ratio: large.claim_ms.p99 / small.claim_ms.p99,
        small,
        large,
        fill_seconds,
        load_average_1m: [load_before, system::load_average()],
    })
}

/// Writes finished steps `from..to` (and their runs and attempts) in chunks, then vacuums
/// and analyzes.
async fn fill(pool: &PgPool, from: u64, to: u64) -> anyhow::Result<()> {
    let bar = ProgressBar::new(to.saturating_sub(from));
    bar.set_style(
        ProgressStyle::with_template("{elapsed:>4} [{bar:40}] {pos}/{len} finished steps written {per_sec} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let mut at = from;
    while at < to {
        let end = (at + FILL_CHUNK).min(to);
        testing::fill_history(pool, at, end).await.context("cannot write the history")?;
        bar.inc(end - at);
        at = end;
    }
    bar.set_message("vacuum analyze");
    testing::vacuum_history(pool).await?;
    bar.finish_and_clear();
    Ok(())
}

/// Submits PROBE_STEPS fresh noop steps and takes them through lease, claim and success
/// like the Lambdas do, one statement at a time, timing each.
async fn probe(pool: &PgPool, store: &Store, history: u64) -> anyhow::Result<Probe> {
    let settings = rara_domain::config::Config::from_lookup("bench-scale", |_| None)?;
    let steps: Vec<StepDefinition> = (0..PROBE_STEPS)
        .map(|i| StepDefinition {
            name: format!("p{i}"),
            operation: "noop".into(),
            version: None,
            input: serde_json::json!({}),
            depends_on: vec![],
            max_attempts: None,
            ..Default::default()
        })
        .collect();
    let workflow = WorkflowDefinition {
        name: "bench-scale".into(),
        idempotency_key: None,
        inputs: Default::default(),
        output: None,
        timeout_seconds: None,
        steps,
    };
    store.submit(&workflow.plan(&settings)?).await?;
    let timings = time_lifecycle(store).await?;
    let (finished, bytes): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM steps WHERE status = 'succeeded'), pg_total_relation_size('steps')",
    )
    .fetch_one(pool)
    .await
    .context("cannot read the table size")?;
    anyhow::ensure!(
        finished as u64 == history + PROBE_STEPS as u64,
        "expected {history} finished steps plus the probe"
    );
    Ok(Probe {
        finished_steps: history,
        steps_table_mb: bytes as f64 / 1024.0 / 1024.0,
        claim_ms: percentiles(timings.claim),
        lease_ms: percentiles(timings.lease),
        succeed_ms: percentiles(timings.succeed),
    })
}

/// Milliseconds per statement.
#[derive(Debug, Default)]
struct Timings {
    lease: Vec<f64>,
    claim: Vec<f64>,
    succeed: Vec<f64>,
}

/// Leases every due step in batches of LEASE_BATCH, claims and succeeds them in batches of
/// CLAIM_BATCH, timing each statement.
async fn time_lifecycle(store: &Store) -> anyhow::Result<Timings> {
    let lease = Duration::from_secs(60);
    let mut timings = Timings::default();
    loop {
        let t = Instant::now();
        let leased = store.lease_due("bench-scale-scheduler", LEASE_BATCH, lease).await?;
        timings.lease.push(t.elapsed().as_secs_f64() * 1000.0);
        if leased.is_empty() {
            return Ok(timings);
        }
        for chunk in leased.chunks(CLAIM_BATCH) {
            let requests: Vec<ClaimRequest> =
                chunk.iter().map(|l| ClaimRequest { step_id: l.step_id, lease_token: l.lease_token }).collect();
            let t = Instant::now();
            let outcomes = store.claim("bench-scale-executor", &requests, lease).await?;
            timings.claim.push(t.elapsed().as_secs_f64() * 1000.0);
            let done: Vec<_> = outcomes
                .into_iter()
                .filter_map(|o| match o {
                    ClaimOutcome::Claimed(c) => Some((c.holder, serde_json::json!({}))),
                    _ => None,
                })
                .collect();
            anyhow::ensure!(done.len() == chunk.len(), "a fresh step could not be claimed");
            let t = Instant::now();
            store.succeed(&done).await?;
            timings.succeed.push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
}

pub fn print(r: &Report) {
    println!(
        "rara-bench scale: claim latency against finished history ({} fresh steps, claim batch {})",
        r.probe_steps, r.claim_batch
    );
    for p in [&r.small, &r.large] {
        println!(
            "  {:>10} finished ({:>8.0} MiB): claim p50 {:.2} p95 {:.2} p99 {:.2} ms | lease p50 {:.2} p99 {:.2} ms | succeed p50 {:.2} p99 {:.2} ms",
            p.finished_steps,
            p.steps_table_mb,
            p.claim_ms.p50,
            p.claim_ms.p95,
            p.claim_ms.p99,
            p.lease_ms.p50,
            p.lease_ms.p99,
            p.succeed_ms.p50,
            p.succeed_ms.p99
        );
    }
    println!("  claim ratio large/small: p50 {:.2}×, p99 {:.2}×", r.claim_p50_ratio, r.claim_p99_ratio);
    println!(
        "  history fill {:.0} s; load average (1 m) {:.2} → {:.2}",
        r.fill_seconds, r.load_average_1m[0], r.load_average_1m[1]
    );
}
