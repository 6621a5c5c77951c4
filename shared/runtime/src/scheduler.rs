//! The scheduler: reap expired leases, then lease due steps in batches and send one
//! message per step (identifiers only). Entries that fail to send have their lease
//! released at once, so the step is due again instead of waiting for the reaper.

use std::sync::Arc;
use std::time::Duration;

use rara_queue::{Outgoing, Queue, StepMessage};
use rara_store::Store;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::metrics::Counters;
use crate::settings::Settings;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] rara_store::Error),
    #[error(transparent)]
    Queue(#[from] rara_queue::Error),
}

impl Error {
    /// Whether trying again later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Store(e) => e.is_retryable(),
            Error::Queue(_) => true,
        }
    }
}

#[derive(Clone)]
pub struct Scheduler {
    store: Store,
    queue: Arc<dyn Queue>,
    settings: Arc<Settings>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler").field("worker", &self.settings.core.worker_id).finish_non_exhaustive()
    }
}

impl Scheduler {
    pub fn new(store: Store, queue: Arc<dyn Queue>, settings: Arc<Settings>) -> Self {
        Scheduler { store, queue, settings }
    }

    /// One pass: reap, then lease and send until nothing is due.
    pub async fn pass(&self) -> Result<Counters, Error> {
        let mut counters = Counters::default();
        let reaped = self.store.reap_expired(self.settings.reap_batch).await?;
        counters.reaped = reaped.total();
        if reaped.total() > 0 {
            tracing::info!(
                released_leased = reaped.released_leased,
                released_running = reaped.released_running,
                failed = reaped.failed,
                "reaped expired leases"
            );
        }
        loop {
            let round = self.lease_round().await?;
            counters += round;
            // A short round means nothing more is due right now.
            if round.leased < u64::from(self.settings.lease_batch) {
                return Ok(counters);
            }
        }
    }

    /// Passes until `budget` is spent (polling every `scheduler_poll` while nothing is
    /// due) or `stop` fires. `budget = None` runs until `stop`. A pass that fails for a
    /// passing reason (a dropped connection, a restarting database) is logged and tried
    /// again at the next poll; any other error ends the run.
    pub async fn run(&self, budget: Option<Duration>, stop: CancellationToken) -> Result<Counters, Error> {
        let end = budget.map(|b| Instant::now() + b);
        let mut total = Counters::default();
        loop {
            match self.pass().await {
                Ok(counters) => total += counters,
                Err(e) if e.is_retryable() => tracing::warn!(error = %e, "scheduler pass failed; trying again"),
                Err(e) => return Err(e),
            }
            let pause = self.settings.scheduler_poll;
            if end.is_some_and(|end| Instant::now() + pause >= end) {
                return Ok(total);
            }
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = stop.cancelled() => return Ok(total),
            }
        }
    }

    async fn lease_round(&self) -> Result<Counters, Error> {
        let core = &self.settings.core;
        let leased = self.store.lease_due(&core.worker_id, self.settings.lease_batch, core.lease_duration).await?;
        if leased.is_empty() {
            return Ok(Counters::default());
        }
        let messages: Vec<Outgoing> = leased
            .iter()
            .enumerate()
            .map(|(i, l)| Outgoing {
                id: i.to_string(),
                body: StepMessage::new(l.step_id, l.lease_token).to_body(),
                traceparent: Some(crate::new_traceparent()),
            })
            .collect();
        let failed_ids = match self.queue.send(&messages).await {
            Ok(failed) => failed,
            Err(e) => {
                tracing::error!(error = %e, "sending step messages failed; releasing their leases");
                messages.iter().map(|m| m.id.clone()).collect()
            }
        };
        let unsent: Vec<(uuid::Uuid, uuid::Uuid)> = failed_ids
            .iter()
            .filter_map(|id| id.parse::<usize>().ok().and_then(|i| leased.get(i)))
            .map(|l| (l.step_id, l.lease_token))
            .collect();
        let released = if unsent.is_empty() { 0 } else { self.store.release(&unsent).await? };
        for l in &leased {
            tracing::debug!(run_id = %l.run_id, step_id = %l.step_id, "leased");
        }
        Ok(Counters {
            leased: leased.len() as u64,
            sent: (leased.len() - unsent.len()) as u64,
            released,
            ..Counters::default()
        })
    }
}
