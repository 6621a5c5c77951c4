//! `rara-bench`: noop steps end to end on the Postgres path, in one process, through
//! rara's store and runtime APIs.
//!
//! Every run creates a scratch database (`rara_bench_<random>`) on the server of
//! `DATABASE_URL`, migrates it, measures, and drops it. `rara-bench --help` lists the modes;
//! BENCHMARKS.md has the results and how to read them.
//!
//! # Layout
//!
//! - `main.rs`: the scratch database around a run, and its output.
//! - `cli.rs`: the command line, read into the [`Benchmark`] to run.
//! - `options.rs`: what a throughput run is asked to do ([`Mode`](options::Mode), the queue).
//! - `throughput.rs`: the `flat`, `dag`, `rate` and `soak` modes: the scheduler loop and K
//!   executor loops (the Lambdas' handler code) against an in-memory queue or SQS.
//! - `workload.rs`: the workflows submitted (flat runs, DAG units) and the submitter of
//!   `rate` and `soak`.
//! - `measure.rs`: what is read after a run (latency, reads, statistics) and the [`Report`].
//! - `minutes.rs`: what a soak reads at the end of each minute while the loops run (latency,
//!   rows in the history tables), before `--prune-after` lets the scheduler delete it.
//! - `report.rs`: the report's types and its text form (`--json` prints the same as JSON).
//! - `counted.rs`: a queue wrapper that counts requests (what SQS and Lambda would bill).
//! - `cost.rs`: the AWS cost estimate and its list prices.
//! - `system.rs`: CPU, memory and load of this process and of the Postgres backends.
//! - `scale.rs`: the `scale` mode: claim latency against finished history.
//! - `backlog.rs`: the `backlog` mode: messages per step behind a queue that backs up past
//!   the execution lease (lease churn), on SQS by default.

mod backlog;
mod cli;
mod cost;
mod counted;
mod measure;
mod minutes;
mod options;
mod report;
mod scale;
mod system;
mod throughput;
mod workload;

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use rara_testkit::scratch::ScratchDb;

use crate::cli::{Benchmark, Cli};
use crate::report::Report;

#[allow(clippy::large_enum_variant, reason = "one value per process, printed and dropped")]
enum Output {
    Throughput(Report),
    Scale(scale::Report),
    Backlog(backlog::Report),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("RARA_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .try_init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(bench(Benchmark::from(cli.mode), cli.json)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs one benchmark on a scratch database and prints its report.
async fn bench(benchmark: Benchmark, json: bool) -> anyhow::Result<()> {
    let scratch = ScratchDb::on_server_of_env("rara_bench").context("DATABASE_URL is not a Postgres URL")?;
    let admin = system::pool(&scratch.admin_options(), 1).await.context("cannot reach Postgres")?;
    let outcome = run(benchmark, &admin, &scratch).await;
    if let Err(e) = scratch.drop_database().await {
        eprintln!("warning: could not drop the scratch database {}: {e}", scratch.name);
    }
    admin.close().await;
    match (outcome?, json) {
        (Output::Throughput(report), true) => println!("{}", serde_json::to_string(&report)?),
        (Output::Throughput(report), false) => report::print(&report),
        (Output::Scale(report), true) => println!("{}", serde_json::to_string(&report)?),
        (Output::Scale(report), false) => scale::print(&report),
        (Output::Backlog(report), true) => println!("{}", serde_json::to_string(&report)?),
        (Output::Backlog(report), false) => backlog::print(&report),
    }
    Ok(())
}

async fn run(benchmark: Benchmark, admin: &sqlx::PgPool, scratch: &ScratchDb) -> anyhow::Result<Output> {
    scratch.create_migrated().await.context("cannot create and migrate the scratch database")?;
    match benchmark {
        Benchmark::Throughput(options) => throughput::run(&options, admin, scratch).await.map(Output::Throughput),
        Benchmark::Scale(options) => scale::run(options, scratch).await.map(Output::Scale),
        Benchmark::Backlog(options) => backlog::run(&options, scratch).await.map(Output::Backlog),
    }
}
