//! `rara queue create`: the step queue and its DLQ with the aligned settings. The SQS client
//! follows the SDK's standard environment (`AWS_ENDPOINT_URL` for LocalStack).

use anyhow::Context;
use clap::{Args, Subcommand};
use rara_queue::sqs::create_queue_pair;

use crate::Failure;

/// Manage the step queue.
#[derive(Debug, Args)]
pub struct Queue {
    #[command(subcommand)]
    command: QueueCommand,
}

#[derive(Debug, Subcommand)]
enum QueueCommand {
    /// Create the queue and its DLQ with the aligned settings (visibility timeout =
    /// RARA_VISIBILITY_TIMEOUT_SECONDS, maxReceiveCount = RARA_MAX_RECEIVE_COUNT), for
    /// local use. Prints `export RARA_QUEUE_URL=... RARA_DLQ_URL=...` lines.
    Create {
        #[arg(long, default_value = "rara-steps")]
        name: String,
    },
}

pub async fn run(args: Queue, json: bool) -> Result<(), Failure> {
    let QueueCommand::Create { name } = args.command;
    let config = super::config()?;
    let client = rara_platform::aws::sqs_client_from_env().await;
    let pair = create_queue_pair(&client, &name, config.visibility_timeout, config.max_receive_count)
        .await
        .context("cannot create the queues (is the SQS endpoint up? AWS_ENDPOINT_URL for LocalStack)")?;
    if json {
        println!("{}", serde_json::to_string(&pair).context("encode")?);
    } else {
        println!("export RARA_QUEUE_URL={}", pair.queue_url);
        println!("export RARA_DLQ_URL={}", pair.dlq_url);
    }
    Ok(())
}
