//! `rara-console-bench`: how long the server takes to answer the console's run page (and the
//! API's run) for a run of N steps, measured through the rara-api router in process: the
//! store's reads, the layout of the DAG and the timeline, the HTML. On a scratch database
//! (`rara_console_bench_<random>`) of the server of `DATABASE_URL`, dropped afterwards.
//!
//! The run is a DAG of `--steps` steps in layers of 25, each step depending on two of the
//! layer before; every step finished (one in ten after a retry, so with two attempts), with
//! an output and a progress message, as a finished run of that size reads.
//!
//! With `--history N`, N finished steps of history are written first (`rara_store::testing`),
//! their attempts spread evenly over the last `--history-days` days, and the landing page (the
//! overview over that history, and the runs list) is measured too, and a search of the runs list
//! that matches nothing (the worst case of its walk).
//!
//! ```text
//! cargo run --release -p rara-console-bench -- --steps 1000 --requests 50
//! cargo run --release -p rara-console-bench -- --history 1000000 --history-days 7
//! ```

use std::time::{Duration, Instant};

use anyhow::Context;
use axum::body::Body;
use axum::http::Request;
use clap::Parser;
use http_body_util::BodyExt;
use rara_domain::config::Config;
use rara_domain::workflow::{Format, WorkflowDefinition};
use rara_store::Store;
use rara_testkit::scratch::ScratchDb;
use tower::ServiceExt;

#[derive(Debug, Parser)]
struct Args {
    /// Steps in the run.
    #[arg(long, default_value_t = 1000)]
    steps: usize,
    /// Requests measured per page (after two unmeasured ones).
    #[arg(long, default_value_t = 50)]
    requests: usize,
    /// Finished steps of history written before the run (a multiple of 1,000).
    #[arg(long, default_value_t = 0)]
    history: u64,
    /// Days over which the history's attempts started, evenly, up to now.
    #[arg(long, default_value_t = 7.0)]
    history_days: f64,
}

/// Steps per layer of the DAG.
const LAYER: usize = 25;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let scratch = ScratchDb::on_server_of_env("rara_console_bench").context("DATABASE_URL is not a Postgres URL")?;
    scratch.create_migrated().await.context("cannot create the scratch database")?;
    let result = measure(&args, &scratch).await;
    scratch.drop_database().await.context("cannot drop the scratch database")?;
    result
}

async fn measure(args: &Args, scratch: &ScratchDb) -> anyhow::Result<()> {
    let pool = rara_store::pool_options().max_connections(4).connect_with(scratch.connect_options()).await?;
    history(&pool, args.history, args.history_days).await?;
    let store = Store::new(pool.clone());
    let config = Config::from_lookup("bench", |_| None)?;
    let plan = WorkflowDefinition::parse(&definition(args.steps), Format::Yaml)?.plan(&config)?;
    let run = store.submit(&plan).await?.run_id;
    finish(&pool, run).await?;
    let router = rara_api::Api::new(store, config, rara_api::Auth::random())?.router();

    println!(
        "run of {} steps ({} attempts), {} requests per page, release build: {}",
        args.steps,
        args.steps + args.steps / 10,
        args.requests,
        !cfg!(debug_assertions)
    );
    let mut pages = vec![("console run page", format!("/runs/{run}")), ("API run (JSON)", format!("/api/runs/{run}"))];
    if args.history > 0 {
        println!("history: {} steps, attempts over {} days", args.history, args.history_days);
        pages.push(("landing (last hour)", "/".to_owned()));
        pages.push(("landing (last day)", "/?window=day".to_owned()));
        // A search that matches nothing: the page walks every run (issue 48's filters).
        pages.push(("search, no match", "/?error=E_NONE&where=inputs.tenant%3Dnobody".to_owned()));
    }
    for (what, uri) in pages {
        let mut times = Vec::with_capacity(args.requests);
        let mut bytes = 0;
        for i in 0..args.requests + 2 {
            let started = Instant::now();
            let response = router.clone().oneshot(Request::get(&uri).body(Body::empty())?).await?;
            anyhow::ensure!(response.status().is_success(), "{uri} answered {}", response.status());
            bytes = response.into_body().collect().await?.to_bytes().len();
            if i >= 2 {
                times.push(started.elapsed());
            }
        }
        times.sort();
        println!(
            "{what:<18} median {:>7.1} ms  p95 {:>7.1} ms  max {:>7.1} ms  ({} KiB)",
            ms(times[times.len() / 2]),
            ms(times[(times.len() * 95).div_ceil(100).saturating_sub(1)]),
            ms(times[times.len() - 1]),
            bytes / 1024
        );
    }
    Ok(())
}

/// `steps` finished steps of history, in chunks, their attempts spread evenly over the last
/// `days` days (the oldest step's first), then vacuumed and analyzed as autovacuum would.
async fn history(pool: &sqlx::PgPool, steps: u64, days: f64) -> anyhow::Result<()> {
    const CHUNK: u64 = 200_000;
    for from in (0..steps).step_by(CHUNK as usize) {
        rara_store::testing::fill_history(pool, from, (from + CHUNK).min(steps)).await?;
    }
    if steps > 0 {
        sqlx::query(
            "UPDATE step_attempts SET started_at = now() - make_interval(secs => $1 * (1 - (-fence)::float8 / $2)),
                    finished_at = now() - make_interval(secs => $1 * (1 - (-fence)::float8 / $2)) + interval '20 ms'
             WHERE leased_by = 'history'",
        )
        .bind(days * 86_400.0)
        .bind(steps as f64)
        .execute(pool)
        .await?;
        rara_store::testing::vacuum_history(pool).await?;
    }
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Layers of [`LAYER`] steps; each step depends on two steps of the layer before.
fn definition(steps: usize) -> String {
    let mut yaml = String::from("name: large\nsteps:\n");
    for i in 0..steps {
        yaml.push_str(&format!("  - name: s{i}\n    operation: noop\n"));
        if i >= LAYER {
            let base = (i / LAYER - 1) * LAYER;
            let (a, b) = (base + i % LAYER, base + (i + 1) % LAYER);
            yaml.push_str(&format!("    depends_on: [s{a}, s{b}]\n"));
        }
    }
    yaml
}

/// Every step finished as an executor would leave it: attempts (a retry for one in ten), an
/// output, a progress message; the run succeeded.
async fn finish(pool: &sqlx::PgPool, run: uuid::Uuid) -> anyhow::Result<()> {
    let mut tx = pool.begin().await?;
    sqlx::query(
        "INSERT INTO step_attempts (step_id, attempt, fence, leased_by, lease_token, outcome, error, started_at, finished_at, retry_at)
         SELECT id, 1, position + 1, 'bench', gen_random_uuid(), 'retrying',
                '{\"code\": \"FLAKY\", \"message\": \"once\", \"retryable\": true}', now() - interval '10 minutes' + position * interval '500 ms',
                now() - interval '10 minutes' + position * interval '500 ms' + interval '40 ms',
                now() - interval '10 minutes' + position * interval '500 ms' + interval '1 s'
         FROM steps WHERE run_id = $1 AND position % 10 = 0",
    )
    .bind(run)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO step_attempts (step_id, attempt, fence, leased_by, lease_token, outcome, started_at, finished_at)
         SELECT id, CASE WHEN position % 10 = 0 THEN 2 ELSE 1 END, position + 100000, 'bench', gen_random_uuid(), 'succeeded',
                now() - interval '10 minutes' + position * interval '500 ms' + interval '1 s',
                now() - interval '10 minutes' + position * interval '500 ms' + interval '1200 ms'
         FROM steps WHERE run_id = $1",
    )
    .bind(run)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE steps SET status = 'succeeded', attempt = CASE WHEN position % 10 = 0 THEN 2 ELSE 1 END, pending_deps = 0,
                output = jsonb_build_object('rows', position, 'ok', true),
                progress = '{\"fraction\": 1.0, \"message\": \"done\"}', finished_at = now()
         WHERE run_id = $1",
    )
    .bind(run)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE workflow_runs SET status = 'succeeded', steps_unfinished = 0, finished_at = now() WHERE id = $1",
    )
    .bind(run)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}
