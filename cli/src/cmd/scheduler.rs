//! `rara scheduler`: the scheduler Lambda's handler code, run locally against Postgres and an
//! SQS API (`AWS_ENDPOINT_URL` for LocalStack). Ctrl-C or SIGTERM stops it cleanly.

use clap::Args;
use rara_platform::wiring::Wiring;

use crate::Failure;

/// Run the scheduler locally (the Lambda's handler code): reap, lease, enqueue.
#[derive(Debug, Args)]
pub struct Scheduler {
    /// One pass (reap, then lease and send until nothing is due), then exit.
    #[arg(long)]
    once: bool,
}

pub async fn run(args: Scheduler, json: bool) -> Result<(), Failure> {
    rara_platform::wiring::init_logging("rara-scheduler")?;
    let wiring = Wiring::from_env("scheduler").await?;
    let scheduler = wiring.scheduler()?;
    let counters =
        if args.once { scheduler.pass().await? } else { scheduler.run(None, super::stop_on_signal()).await? };
    super::summary("scheduler", &counters, json);
    rara_platform::telemetry::flush().await;
    Ok(())
}
