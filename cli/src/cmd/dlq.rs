//! `rara dlq list|redrive`: the dead-letter queue (RARA_DLQ_URL). The SQS client follows the
//! SDK's standard environment (`AWS_ENDPOINT_URL` for LocalStack).

use std::time::Duration;

use clap::{Args, Subcommand};
use rara_queue::sqs::{DLQ_REASON, DLQ_REASON_CODE, SqsQueue};
use rara_queue::{Outgoing, Queue};

use crate::{Failure, table};

/// Inspect or redrive the dead-letter queue (RARA_DLQ_URL).
#[derive(Debug, Args)]
pub struct Dlq {
    #[command(subcommand)]
    command: DlqCommand,
}

#[derive(Debug, Subcommand)]
enum DlqCommand {
    /// Show the messages on the DLQ with their reasons (they stay there).
    List {
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Move the DLQ's messages back to the step queue.
    Redrive {
        #[arg(long, default_value_t = 1000)]
        limit: u32,
    },
}

pub async fn run(args: Dlq, json: bool) -> Result<(), Failure> {
    match args.command {
        DlqCommand::List { limit } => list(limit, json).await,
        DlqCommand::Redrive { limit } => redrive(limit, json).await,
    }
}

fn required(var: &str) -> Result<String, Failure> {
    std::env::var(var)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .ok_or_else(|| anyhow::anyhow!("{var} is not set (run `rara queue create` and export what it prints)").into())
}

/// A queue over the DLQ (for peeking, deleting) and one over the step queue.
async fn dlq_and_queue() -> Result<(SqsQueue, SqsQueue), Failure> {
    let client = SqsQueue::client_from_env().await;
    let dlq = SqsQueue::new(client.clone(), required("RARA_DLQ_URL")?, None);
    let queue = SqsQueue::new(client, required("RARA_QUEUE_URL")?, None);
    Ok((dlq, queue))
}

async fn list(limit: u32, json: bool) -> Result<(), Failure> {
    let (dlq, _) = dlq_and_queue().await?;
    let mut rows = Vec::new();
    let mut receipts = Vec::new();
    while (rows.len() as u32) < limit {
        let batch = dlq.receive_with_attributes((limit - rows.len() as u32).min(10), Duration::from_secs(1)).await?;
        if batch.is_empty() {
            break;
        }
        for (message, attributes) in batch {
            receipts.push(message.receipt_handle.clone());
            rows.push(serde_json::json!({
                "message_id": message.message_id,
                "reason_code": attributes.get(DLQ_REASON_CODE),
                "reason": attributes.get(DLQ_REASON),
                "receive_count": message.receive_count,
                "body": message.body,
            }));
        }
    }
    // Peeking must not hide them: make every peeked message visible again.
    for receipt in &receipts {
        let _ = dlq.change_visibility(receipt, Duration::ZERO).await;
    }
    if json {
        println!("{}", serde_json::Value::Array(rows));
    } else if rows.is_empty() {
        println!("the dead-letter queue is empty");
    } else {
        print!("{}", table::dead_letters(&rows));
    }
    Ok(())
}

async fn redrive(limit: u32, json: bool) -> Result<(), Failure> {
    let (dlq, queue) = dlq_and_queue().await?;
    let mut moved = 0u32;
    while moved < limit {
        let batch = dlq.receive((limit - moved).min(10), Duration::from_secs(1)).await?;
        if batch.is_empty() {
            break;
        }
        let outgoing: Vec<Outgoing> = batch
            .iter()
            .enumerate()
            .map(|(i, m)| Outgoing { id: i.to_string(), body: m.body.clone(), traceparent: m.traceparent.clone() })
            .collect();
        let failed = queue.send(&outgoing).await?;
        // Delete from the DLQ only what reached the step queue: nothing is lost.
        let sent: Vec<String> = batch
            .iter()
            .enumerate()
            .filter(|(i, _)| !failed.contains(&i.to_string()))
            .map(|(_, m)| m.receipt_handle.clone())
            .collect();
        moved += sent.len() as u32;
        dlq.delete(&sent).await?;
        if !failed.is_empty() {
            return Err(
                anyhow::anyhow!("{} message(s) could not be sent back; they stay on the DLQ", failed.len()).into()
            );
        }
    }
    if json {
        println!("{}", serde_json::json!({"redriven": moved}));
    } else {
        println!("moved {moved} message(s) back to the step queue");
    }
    Ok(())
}
