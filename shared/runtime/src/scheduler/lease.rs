//! One lease round: lease the due steps in one statement, pack them into messages (up to
//! `RARA_STEPS_PER_MESSAGE` steps each, identifiers only), send them ([`send`](super::send)),
//! and release at once the leases of the steps whose messages were not sent.

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use rara_queue::{MessageStep, Outgoing, StepMessage};
use rara_store::lease::Leased;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::trace::RoundTrace;
use super::{Error, Scheduler};
use crate::metrics::Counters;

impl Scheduler {
    pub(super) async fn lease_round(&self, cut: &CancellationToken) -> Result<Counters, Error> {
        let core = &self.settings.core;
        // The lease lasts until the message can be claimed (a backlog included), not for an
        // execution: a message waiting in the queue is never sent twice.
        let lease_started = SystemTime::now();
        let leased = self
            .db(self.store.lease_due(&core.worker_id, self.settings.lease_batch, self.settings.delivery_timeout))
            .await?;
        let lease_ended = SystemTime::now();
        if leased.is_empty() {
            return Ok(Counters { lease_rounds: 1, ..Counters::default() });
        }
        let traces = RoundTrace::of(&leased);
        // Message `i` names the steps of chunk `i`.
        let chunks: Vec<&[Leased]> = leased.chunks(self.settings.steps_per_message).collect();
        let messages = messages(&chunks, &traces);
        let send_started = SystemTime::now();
        let failed_ids = self.send(&messages, cut).await;
        let unsent: Vec<(Uuid, Uuid)> = failed_ids
            .iter()
            .filter_map(|id| id.parse::<usize>().ok().and_then(|i| chunks.get(i)))
            .flat_map(|chunk| chunk.iter().map(|l| (l.step_id, l.lease_token)))
            .collect();
        let send_ended = SystemTime::now();
        let unsent_ids: HashSet<Uuid> = unsent.iter().map(|(id, _)| *id).collect();
        let sent_ids = leased.iter().map(|l| l.step_id).filter(|id| !unsent_ids.contains(id));
        traces.emit(sent_ids, messages.len(), (lease_started, lease_ended), (send_started, send_ended));
        let released = if unsent.is_empty() { 0 } else { self.db(self.store.release(&unsent)).await? };
        for l in &leased {
            tracing::debug!(run_id = %l.run_id, step_id = %l.step_id, "leased");
        }
        Ok(Counters {
            lease_rounds: 1,
            leased: leased.len() as u64,
            sent: (leased.len() - unsent.len()) as u64,
            messages: (messages.len() - failed_ids.len().min(messages.len())) as u64,
            released,
            ..Counters::default()
        })
    }
}

/// One message per chunk (its id is the chunk's index), each step with its attempt's
/// `traceparent`, the message with the operations its steps run.
fn messages(chunks: &[&[Leased]], traces: &RoundTrace) -> Vec<Outgoing> {
    chunks
        .iter()
        .enumerate()
        .map(|(i, chunk)| {
            let steps: Vec<MessageStep> = chunk
                .iter()
                .map(|l| MessageStep {
                    message: StepMessage::new(l.step_id, l.lease_token),
                    traceparent: Some(traces.traceparent(l.step_id)),
                })
                .collect();
            Outgoing {
                id: i.to_string(),
                body: rara_queue::encode_steps(&steps),
                traceparent: steps.first().and_then(|s| s.traceparent.clone()),
                operations: rara_queue::operations::encode(chunk.iter().map(|l| l.operation.as_str())),
                delay: Duration::ZERO,
            }
        })
        .collect()
}
