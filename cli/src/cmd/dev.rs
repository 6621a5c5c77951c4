//! `rara dev`: migrate, create the queues, and run the scheduler and the executor in this
//! process until Ctrl-C, against `DATABASE_URL` and the SQS API of `AWS_ENDPOINT_URL`.

use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use rara_platform::runner::{RunnerOptions, run_executor};
use rara_platform::wiring::Wiring;
use rara_queue::Queue;

use crate::Failure;

/// Keep a local stack running: migrate, create the queues, run the scheduler and the
/// executor in this process until Ctrl-C.
#[derive(Debug, Args)]
pub struct Dev {
    /// The queue name to create and use.
    #[arg(long, default_value = "rara-dev")]
    queue_name: String,
}

pub async fn run(args: Dev, _json: bool) -> Result<(), Failure> {
    rara_platform::wiring::init_logging("rara-dev")?;
    let lookup = |k: &str| std::env::var(k).ok();
    let core = rara_domain::config::Config::from_lookup("dev", lookup)?;
    super::migrate::migrate_quietly(&core).await?;
    let client = rara_platform::aws::sqs_client_from_env().await;
    let pair =
        rara_queue::sqs::create_queue_pair(&client, &args.queue_name, core.visibility_timeout, core.max_receive_count)
            .await?;
    eprintln!("rara dev: queue {} (DLQ {})", pair.queue_url, pair.dlq_url);
    let settings = rara_runtime::settings::Settings::from_lookup("dev", |k| match k {
        "RARA_QUEUE_URL" => Some(pair.queue_url.clone()),
        "RARA_DLQ_URL" => Some(pair.dlq_url.clone()),
        _ => lookup(k),
    })?;
    // `rara dev` keeps the executor's egress policy: servers on this machine (loopback) and
    // on private networks stay closed unless RARA_HTTP_ALLOW_CIDRS opens them.
    let loopback_closed = settings.egress.check_ip(std::net::Ipv4Addr::LOCALHOST.into()).is_err();
    let hint = if loopback_closed { " (RARA_HTTP_ALLOW_CIDRS=127.0.0.1/32 opens servers on this machine)" } else { "" };
    eprintln!("rara dev: http.request may reach {}{hint}", settings.egress);
    let wiring = Wiring::connect(settings).await?;
    let scheduler = wiring.scheduler()?;
    let executor = wiring.batch_executor().await?;
    let options = RunnerOptions {
        batch_size: 10,
        batching_window: Duration::ZERO,
        wait: Duration::from_secs(1),
        batch_timeout: wiring.settings.core.function_timeout,
        margin: wiring.settings.deadline_margin,
        until_idle: None,
    };
    let stop = super::stop_on_signal();
    let queue: Arc<dyn Queue> = wiring.queue.clone();
    eprintln!("rara dev: scheduler and executor running; Ctrl-C to stop");
    let (scheduled, executed) =
        tokio::join!(scheduler.run(None, stop.clone()), run_executor(&executor, queue, &options, stop.clone()));
    let mut counters = scheduled?;
    counters += executed?;
    super::summary("dev", &counters, false);
    rara_platform::telemetry::flush().await;
    Ok(())
}
