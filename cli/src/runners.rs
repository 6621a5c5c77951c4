//! `rara scheduler` and `rara executor`: the Lambdas' handler code, run locally against
//! Postgres and an SQS API (`AWS_ENDPOINT_URL` for LocalStack). Ctrl-C or SIGTERM stops
//! taking work; what is held is finished first, then the process exits cleanly.

use std::sync::Arc;
use std::time::Duration;

use rara_queue::Queue;
use rara_runtime::metrics::Counters;
use rara_runtime::runner::{RunnerOptions, run_executor};
use rara_runtime::wiring::Wiring;
use tokio_util::sync::CancellationToken;

use crate::Failure;

/// A token fired by Ctrl-C or SIGTERM.
fn stop_on_signal() -> CancellationToken {
    let stop = CancellationToken::new();
    let fire = stop.clone();
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = ctrl_c.await;
                    fire.cancel();
                    return;
                }
            };
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
        eprintln!("stopping: finishing what is held...");
        fire.cancel();
    });
    stop
}

fn summary(what: &str, counters: &Counters, json: bool) {
    if json {
        println!("{}", serde_json::to_string(counters).unwrap_or_default());
    } else {
        eprintln!(
            "{what}: leased {} sent {} released {} reaped {} | claimed {} succeeded {} retried {} failed {} stale {} held {} dead-lettered {} lease-lost {}",
            counters.leased,
            counters.sent,
            counters.released,
            counters.reaped,
            counters.claimed,
            counters.succeeded,
            counters.retried,
            counters.failed,
            counters.stale,
            counters.held,
            counters.dead_lettered,
            counters.lease_lost
        );
    }
}

pub async fn scheduler(once: bool, json: bool) -> Result<(), Failure> {
    rara_runtime::wiring::init_logging();
    let wiring = Wiring::from_env("scheduler").await?;
    let scheduler = wiring.scheduler();
    let counters = if once { scheduler.pass().await? } else { scheduler.run(None, stop_on_signal()).await? };
    summary("scheduler", &counters, json);
    Ok(())
}

pub async fn executor(
    until_idle: Option<Duration>,
    batch_size: u32,
    batching_window: Duration,
    json: bool,
) -> Result<(), Failure> {
    rara_runtime::wiring::init_logging();
    let wiring = Wiring::from_env("executor").await?;
    wiring.settings.require_dlq()?;
    let executor = wiring.batch_executor().await?;
    let options = RunnerOptions {
        batch_size,
        batching_window,
        wait: Duration::from_secs(if until_idle.is_some() { 1 } else { 10 }),
        batch_timeout: wiring.settings.core.function_timeout,
        margin: wiring.settings.deadline_margin,
        until_idle,
    };
    let queue: Arc<dyn Queue> = wiring.queue.clone();
    let counters = run_executor(&executor, queue, &options, stop_on_signal()).await?;
    summary("executor", &counters, json);
    Ok(())
}

/// `rara dev`: migrate, create the queues, and run the scheduler and the executor in this
/// process until Ctrl-C, against `DATABASE_URL` and the SQS API of `AWS_ENDPOINT_URL`.
pub async fn dev(queue_name: &str) -> Result<(), Failure> {
    rara_runtime::wiring::init_logging();
    let lookup = |k: &str| std::env::var(k).ok();
    let core = rara_domain::config::Config::from_lookup("dev", lookup)?;
    crate::commands::migrate_quietly(&core).await?;
    let client = rara_queue::sqs::SqsQueue::client_from_env().await;
    let pair = rara_queue::sqs::create_queue_pair(&client, queue_name, core.visibility_timeout, core.max_receive_count)
        .await?;
    eprintln!("rara dev: queue {} (DLQ {})", pair.queue_url, pair.dlq_url);
    let settings = rara_runtime::settings::Settings::from_lookup("dev", |k| match k {
        "RARA_QUEUE_URL" => Some(pair.queue_url.clone()),
        "RARA_DLQ_URL" => Some(pair.dlq_url.clone()),
        _ => lookup(k),
    })?;
    let wiring = Wiring::connect(settings).await?;
    let scheduler = wiring.scheduler();
    let executor = wiring.batch_executor().await?;
    let options = RunnerOptions {
        batch_size: 10,
        batching_window: Duration::ZERO,
        wait: Duration::from_secs(1),
        batch_timeout: wiring.settings.core.function_timeout,
        margin: wiring.settings.deadline_margin,
        until_idle: None,
    };
    let stop = stop_on_signal();
    let queue: Arc<dyn Queue> = wiring.queue.clone();
    eprintln!("rara dev: scheduler and executor running; Ctrl-C to stop");
    let (scheduled, executed) =
        tokio::join!(scheduler.run(None, stop.clone()), run_executor(&executor, queue, &options, stop.clone()));
    let mut counters = scheduled?;
    counters += executed?;
    summary("dev", &counters, false);
    Ok(())
}
