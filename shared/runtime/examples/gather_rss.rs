//! A map of many large children whose dependent would gather them all, at full scale: the
//! gathering is measured in Postgres against `RARA_MAX_GATHERED_BYTES` and the map fails with
//! `OUTPUT_TOO_LARGE` without reading the outputs. Prints the process's peak RSS (`VmHWM`): the
//! scheduler and the executor run here, in process, on an in-memory queue.
//!
//! ```text
//! cargo run --release -p rara-runtime --example gather_rss -- [children] [bytes] [bound]
//! ```
//!
//! Defaults: 10,000 children of 64 KiB each (640 MiB in all), bound 16 MiB (the default).
//! Needs the Postgres of `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/postgres`):
//! a scratch database is created, migrated and dropped.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use rara_domain::StepError;
use rara_domain::executor::{ExecutionContext, Executor};
use rara_platform::runner::{RunnerOptions, run_executor};
use rara_queue::Queue;
use rara_queue::memory::MemoryQueue;
use rara_runtime::executor::BatchExecutor;
use rara_runtime::scheduler::Scheduler;
use rara_runtime::settings::Settings;
use rara_store::Store;
use rara_testkit::scratch::ScratchDb;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// `pad`: returns `bytes` bytes of output.
struct Pad(usize);

#[async_trait::async_trait]
impl Executor for Pad {
    async fn execute(&self, _: ExecutionContext, _: Value) -> Result<Value, StepError> {
        Ok(json!({ "pad": "x".repeat(self.0) }))
    }
}

/// A line of `/proc/self/status` (`VmHWM`, `VmRSS`), in kB.
fn status_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':')?.trim().strip_suffix("kB")?.trim().parse().ok())
        .unwrap_or(0)
}

fn arg(n: usize, default: usize) -> usize {
    std::env::args().nth(n).and_then(|a| a.parse().ok()).unwrap_or(default)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (children, bytes, bound) = (arg(1, 10_000), arg(2, 64 * 1024), arg(3, 16 * 1024 * 1024));
    let db = ScratchDb::on_server_of_env("rara_gather")?;
    db.create_migrated().await?;
    let pool = sqlx::postgres::PgPoolOptions::new().max_connections(10).connect_with(db.connect_options()).await?;
    let store = Store::new(pool);
    let vars = [
        ("RARA_QUEUE_URL", "memory".to_owned()),
        ("RARA_MAX_GATHERED_BYTES", bound.to_string()),
        ("RARA_PROGRESS_INTERVAL_MS", "100".to_owned()),
    ];
    let settings = Arc::new(Settings::from_lookup("example", |k| {
        vars.iter().find(|(name, _)| *name == k).map(|(_, v)| v.clone())
    })?);
    let queue: Arc<dyn Queue> = Arc::new(MemoryQueue::new(settings.core.visibility_timeout, 10));
    let mut registry = rara_runtime::registry::standard_registry(&settings).await?;
    registry.register("pad", Pad(bytes))?;
    let executor = BatchExecutor::new(store.clone(), queue.clone(), Arc::new(registry), &settings);

    let items: Vec<usize> = (0..children).collect();
    let yaml = format!(
        "name: wide\ninputs: {{items: {{type: array, default: {items:?}}}}}\nsteps:\n  - {{name: each, operation: pad, for_each: {{$input: /items}}}}\n  - {{name: after, operation: noop, depends_on: [each], input: {{all: {{$output: each}}}}}}\n"
    );
    let run_id = rara_testkit::submit(&store, &settings, &yaml).await;
    println!(
        "{children} children of {bytes} bytes ({} MiB in all), RARA_MAX_GATHERED_BYTES={bound}",
        (children * bytes) >> 20
    );

    let started = Instant::now();
    let stop = CancellationToken::new();
    let scheduler = Scheduler::new(store.clone(), queue.clone(), settings.clone());
    let scheduling = tokio::spawn({
        let stop = stop.clone();
        async move { scheduler.run(None, stop).await }
    });
    let options = RunnerOptions {
        batch_size: 10,
        batching_window: Duration::ZERO,
        wait: Duration::from_millis(200),
        batch_timeout: settings.core.function_timeout,
        margin: settings.deadline_margin,
        until_idle: None,
    };
    let executing = tokio::spawn({
        let (stop, queue) = (stop.clone(), queue.clone());
        async move { run_executor(&executor, queue, &options, stop).await }
    });
    let status = loop {
        let status: String = sqlx::query_scalar("SELECT status::text FROM workflow_runs WHERE id = $1")
            .bind(run_id)
            .fetch_one(store.pool())
            .await?;
        if status != "running" || started.elapsed() > Duration::from_secs(1800) {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    stop.cancel();
    scheduling.await??;
    executing.await??;
    let (succeeded, error): (i64, Option<Value>) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM steps c WHERE c.parent_id = m.id AND c.status = 'succeeded'), m.error
         FROM steps m WHERE m.run_id = $1 AND m.name = 'each'",
    )
    .bind(run_id)
    .fetch_one(store.pool())
    .await?;
    println!("run {status} in {:.1} s; {succeeded} children succeeded", started.elapsed().as_secs_f64());
    println!("map step's error: {}", error.map_or("none".into(), |e| e.to_string()));
    println!("peak RSS (VmHWM): {} MiB; RSS now (VmRSS): {} MiB", status_kb("VmHWM") / 1024, status_kb("VmRSS") / 1024);
    store.pool().close().await;
    db.drop_database().await?;
    Ok(())
}
