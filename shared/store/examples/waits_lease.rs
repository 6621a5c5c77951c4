//! Lease rounds with and without 100,000 waiting steps beside them (docs/src/internals/waits.md,
//! BENCHMARKS.md "Waits"): waits live outside the lease's indexes, so they must not slow it.
//!
//! ```text
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/rara_waits \
//!   cargo run --release -q -p rara-store --example waits_lease -- [--waiting 100000] [--due 20000]
//! ```
//!
//! Drops and re-creates nothing: point it at a database of its own (it is migrated, then
//! emptied of runs). Each measurement submits `--due` noop steps, `ANALYZE`s, and times lease
//! rounds of 100 until nothing is due (the mean and the median round); first with no wait,
//! then with `--waiting` steps waiting for a signal (started by the waits' own rounds).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::{Duration, Instant};

use rara_domain::config::Config;
use rara_domain::workflow::{Format, WorkflowDefinition};
use rara_store::Store;

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map_or(default, |v| v.parse().unwrap())
}

async fn submit_steps(store: &Store, n: usize, step: &str) {
    let config = Config::from_lookup("bench", |_| None).unwrap();
    for chunk in 0..n.div_ceil(1000) {
        let count = (n - chunk * 1000).min(1000);
        let steps: String = (0..count).map(|i| format!("  - {{name: s{i}, {step}}}\n")).collect();
        let yaml = format!("name: bench\nsteps:\n{steps}");
        let plan = WorkflowDefinition::parse(&yaml, Format::Yaml).unwrap().plan(&config).unwrap();
        store.submit(&plan).await.unwrap();
    }
}

/// Lease rounds of 100 until nothing is due: (mean, median) per round.
async fn rounds(store: &Store, due: usize) -> (Duration, Duration) {
    submit_steps(store, due, "operation: noop").await;
    sqlx::query("ANALYZE steps, workflow_runs").execute(store.pool()).await.unwrap();
    let mut times = Vec::new();
    loop {
        let started = Instant::now();
        let leased = store.lease_due("bench", 100, Duration::from_secs(600)).await.unwrap();
        times.push(started.elapsed());
        if leased.is_empty() {
            break;
        }
    }
    // The leased steps are finished for the next measurement: out of every index of the lease.
    sqlx::query("UPDATE steps SET status = 'cancelled', lease_token = NULL, leased_by = NULL, lease_expires_at = NULL WHERE status = 'leased'")
        .execute(store.pool())
        .await
        .unwrap();
    let mean = times.iter().sum::<Duration>() / times.len() as u32;
    times.sort();
    (mean, times[times.len() / 2])
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (waiting, due) = (arg(&args, "--waiting", 100_000), arg(&args, "--due", 20_000));
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL");
    let store = Store::connect(&url, 2).await.unwrap();
    store.migrate().await.unwrap();
    sqlx::query(
        "TRUNCATE workflow_runs, steps, step_names, step_dependencies, step_attempts, waits, signals, events CASCADE",
    )
    .execute(store.pool())
    .await
    .unwrap();

    let (mean, median) = rounds(&store, due).await;
    println!("no waiting step:       mean {:.3} ms, median {:.3} ms per lease round of 100", ms(mean), ms(median));

    let started = Instant::now();
    submit_steps(&store, waiting, "wait: {signal: approve}").await;
    loop {
        if store.wait_round(1000).await.unwrap().started == 0 {
            break;
        }
    }
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM steps WHERE status = 'waiting'")
        .fetch_one(store.pool())
        .await
        .unwrap();
    println!("{n} steps waiting (submitted and started in {:.1} s)", started.elapsed().as_secs_f64());
    let (with_mean, with_median) = rounds(&store, due).await;
    println!(
        "{n} waiting steps: mean {:.3} ms, median {:.3} ms per lease round of 100",
        ms(with_mean),
        ms(with_median)
    );
    println!(
        "ratio (with / without): mean {:.3}, median {:.3}",
        ms(with_mean) / ms(mean),
        ms(with_median) / ms(median)
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
