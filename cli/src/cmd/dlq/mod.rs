//! `rara dlq list|purge|redrive`: the dead-letter queue (RARA_DLQ_URL). Every entry is
//! classified ([`classify`]): rara's own dead-letters keep their reason; a message SQS moved
//! there (its receive count reached `maxReceiveCount`) is looked up in the store, so an
//! operator can tell the messages a step still waits for (`live`) from those whose step moved
//! on (`stale`). The SQS client follows the SDK's standard environment (`AWS_ENDPOINT_URL`
//! for LocalStack).

mod classify;

use std::collections::HashMap;
use std::time::Duration;

use clap::{Args, Subcommand};
use rara_queue::sqs::{DLQ_REASON, DLQ_REASON_CODE, SqsQueue};
use rara_queue::{Outgoing, Queue, Received};
use rara_store::Store;

use crate::exit::ExitCode;
use crate::{Failure, table};
use classify::{Classification, State};

/// Inspect, purge or redrive the dead-letter queue (RARA_DLQ_URL).
#[derive(Debug, Args)]
pub struct Dlq {
    #[command(subcommand)]
    command: DlqCommand,
}

#[derive(Debug, Subcommand)]
enum DlqCommand {
    /// Show the messages on the DLQ, each classified: rejected (with rara's reason), stale
    /// (its step moved on), live (its step still waits for it) or unknown (they stay there).
    List {
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Delete the DLQ's stale messages (their steps finished, were leased again or handed back).
    Purge {
        /// Required: purge removes only the entries `rara dlq list` classifies stale.
        #[arg(long)]
        stale: bool,
        #[arg(long, default_value_t = 1000)]
        limit: u32,
    },
    /// Move the live messages and rara's own dead-letters back to the step queue; stale and
    /// unknown ones stay on the DLQ.
    Redrive {
        #[arg(long, default_value_t = 1000)]
        limit: u32,
    },
}

pub async fn run(args: Dlq, json: bool) -> Result<(), Failure> {
    match args.command {
        DlqCommand::List { limit } => list(limit, json).await,
        DlqCommand::Purge { stale: false, .. } => Err(Failure::new(
            ExitCode::Usage,
            "purge needs --stale: it removes only the entries whose steps moved on (see `rara dlq list`)",
        )),
        DlqCommand::Purge { stale: true, limit } => purge(limit, json).await,
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
    let client = rara_platform::aws::sqs_client_from_env().await;
    let dlq = SqsQueue::new(client.clone(), required("RARA_DLQ_URL")?, None);
    let queue = SqsQueue::new(client, required("RARA_QUEUE_URL")?, None);
    Ok((dlq, queue))
}

/// One message on the DLQ, received (so hidden until released or deleted), classified.
struct Entry {
    message: Received,
    attributes: HashMap<String, String>,
    class: Classification,
}

impl Entry {
    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "message_id": self.message.message_id,
            "state": self.class.state,
            "classification": self.class.why,
            "reason_code": self.attributes.get(DLQ_REASON_CODE),
            "reason": self.attributes.get(DLQ_REASON),
            "receive_count": self.message.receive_count,
            "body": self.message.body,
        })
    }
}

/// Receives up to `limit` DLQ messages, a page at a time, and classifies each page with one
/// store read (connecting only when a page holds step messages to look up).
async fn peek(dlq: &SqsQueue, limit: u32) -> Result<Vec<Entry>, Failure> {
    let mut store: Option<Store> = None;
    let mut entries: Vec<Entry> = Vec::new();
    while (entries.len() as u32) < limit {
        let batch = dlq.receive_with_attributes((limit - entries.len() as u32).min(10), Duration::from_secs(1)).await?;
        // A message seen again (its visibility ran out while we read) ends the pass.
        let fresh: Vec<_> =
            batch.into_iter().filter(|(m, _)| !entries.iter().any(|e| e.message.message_id == m.message_id)).collect();
        if fresh.is_empty() {
            break;
        }
        let ids: Vec<_> = fresh.iter().flat_map(|(m, a)| classify::steps_to_look_up(&m.body, a)).collect();
        let mut steps = HashMap::new();
        if !ids.is_empty() {
            if store.is_none() {
                store = Some(super::connect(&super::config()?).await?);
            }
            if let Some(store) = &store {
                steps.extend(store.dlq_steps(&ids).await?.into_iter().map(|s| (s.id, s)));
            }
        }
        for (message, attributes) in fresh {
            let class = classify::classify(&message.body, &attributes, &steps);
            entries.push(Entry { message, attributes, class });
        }
    }
    Ok(entries)
}

/// Makes the entries visible on the DLQ again: peeking must not hide them.
async fn release<'a>(dlq: &SqsQueue, entries: impl IntoIterator<Item = &'a Entry>) {
    for entry in entries {
        let _ = dlq.change_visibility(&entry.message.receipt_handle, Duration::ZERO).await;
    }
}

/// Deletes the entries from the DLQ; returns how many went.
async fn delete(dlq: &SqsQueue, entries: &[&Entry]) -> Result<usize, Failure> {
    let receipts: Vec<String> = entries.iter().map(|e| e.message.receipt_handle.clone()).collect();
    let failed = dlq.delete(&receipts).await?;
    Ok(receipts.len() - failed.len())
}

async fn list(limit: u32, json: bool) -> Result<(), Failure> {
    let (dlq, _) = dlq_and_queue().await?;
    let entries = peek(&dlq, limit).await?;
    release(&dlq, &entries).await;
    let rows: Vec<serde_json::Value> = entries.iter().map(Entry::json).collect();
    if json {
        println!("{}", serde_json::Value::Array(rows));
    } else if rows.is_empty() {
        println!("the dead-letter queue is empty");
    } else {
        print!("{}", table::dead_letters(&rows));
    }
    Ok(())
}

async fn purge(limit: u32, json: bool) -> Result<(), Failure> {
    let (dlq, _) = dlq_and_queue().await?;
    let entries = peek(&dlq, limit).await?;
    let (stale, keep): (Vec<&Entry>, Vec<&Entry>) = entries.iter().partition(|e| e.class.state == State::Stale);
    release(&dlq, keep.iter().copied()).await;
    let removed = delete(&dlq, &stale).await?;
    if json {
        println!("{}", serde_json::json!({"purged": removed, "kept": keep.len()}));
    } else {
        println!("removed {removed} stale message(s) from the DLQ; {} other(s) stay", keep.len());
    }
    Ok(())
}

async fn redrive(limit: u32, json: bool) -> Result<(), Failure> {
    let (dlq, queue) = dlq_and_queue().await?;
    let entries = peek(&dlq, limit).await?;
    let (send, skip): (Vec<&Entry>, Vec<&Entry>) =
        entries.iter().partition(|e| e.class.state == State::Live || e.class.own);
    release(&dlq, skip.iter().copied()).await;
    let outgoing: Vec<Outgoing> = send
        .iter()
        .enumerate()
        .map(|(i, e)| Outgoing {
            id: i.to_string(),
            body: e.message.body.clone(),
            traceparent: e.message.traceparent.clone(),
            delay: std::time::Duration::ZERO,
        })
        .collect();
    let failed = queue.send(&outgoing).await?;
    // Delete from the DLQ only what reached the step queue: nothing is lost.
    let reached = |reached: bool| -> Vec<&Entry> {
        send.iter().zip(&outgoing).filter(|(_, o)| failed.contains(&o.id) != reached).map(|(e, _)| *e).collect()
    };
    let (sent, unsent) = (reached(true), reached(false));
    release(&dlq, unsent.iter().copied()).await;
    let moved = delete(&dlq, &sent).await?;
    let skipped = |state: State| skip.iter().filter(|e| e.class.state == state).count();
    let (stale, unknown, rejected) = (skipped(State::Stale), skipped(State::Unknown), skipped(State::Rejected));
    if json {
        println!(
            "{}",
            serde_json::json!({"redriven": moved, "skipped": {"stale": stale, "unknown": unknown, "rejected": rejected}})
        );
    } else {
        println!("moved {moved} message(s) back to the step queue");
        if !skip.is_empty() {
            println!(
                "skipped {}: {stale} stale (their steps moved on; `rara dlq purge --stale` removes them), \
                 {unknown} for unknown steps, {rejected} not step messages; they stay on the DLQ",
                skip.len()
            );
        }
    }
    if !unsent.is_empty() {
        return Err(anyhow::anyhow!("{} message(s) could not be sent back; they stay on the DLQ", unsent.len()).into());
    }
    Ok(())
}
