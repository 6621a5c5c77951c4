//! Progress and artifacts of one execution, written to Postgres under the holder's fence.
//! Progress is throttled whatever its fraction: at most one write per interval per step, and
//! reports in between are dropped, except the first final one (fraction 1.0), which is always
//! written; later ones wait for the slot like any other. A chatty executor cannot flood
//! Postgres: an attempt writes at most one progress row per interval, plus one. Messages are
//! cut to [`MAX_PROGRESS_MESSAGE_BYTES`](rara_remote::bounds::MAX_PROGRESS_MESSAGE_BYTES).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use std::sync::Arc;

use rara_artifacts::{ArtifactStore, Key};
use rara_domain::executor::{Artifact, ArtifactBody, DiscardReporter, ReportError, Reporter, StopReason};
use rara_store::{Holder, Store};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub struct StoreReporter {
    store: Store,
    holder: Holder,
    interval: Duration,
    /// Fired (with its reason) when a write finds the lease gone: the execution must stop.
    loss: Loss,
    last_write: Mutex<Option<Instant>>,
    /// Whether a final report (fraction 1.0) was written: only the first skips the throttle.
    final_written: AtomicBool,
    /// How long one write may take (the lease: a later one is worthless): a silent Postgres
    /// fails the write instead of holding the execution.
    write_bound: Duration,
    /// Where [`Reporter::store_artifact`] writes: the store, the run and the attempt.
    artifacts: Option<(Arc<dyn ArtifactStore>, Uuid, u32)>,
}

impl std::fmt::Debug for StoreReporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreReporter").field("holder", &self.holder).finish_non_exhaustive()
    }
}

impl StoreReporter {
    pub fn new(store: Store, holder: Holder, interval: Duration, loss: Loss, write_bound: Duration) -> Self {
        StoreReporter {
            store,
            holder,
            interval,
            loss,
            last_write: Mutex::new(None),
            final_written: AtomicBool::new(false),
            write_bound,
            artifacts: None,
        }
    }

    /// Artifacts an executor streams ([`Reporter::store_artifact`]) go to `store`, under the
    /// run `run_id` and the attempt `attempt` (`runs/{run}/{step}/{attempt}/{name}`).
    pub fn with_artifacts(mut self, store: Option<Arc<dyn ArtifactStore>>, run_id: Uuid, attempt: u32) -> Self {
        self.artifacts = store.map(|store| (store, run_id, attempt));
        self
    }

    async fn map(&self, e: rara_store::Error) -> ReportError {
        match e {
            rara_store::Error::LeaseLost { .. } => {
                self.loss.lose(&self.store, &self.holder).await;
                ReportError::LeaseLost
            }
            other => ReportError::Unavailable(other.to_string()),
        }
    }

    /// Whether a progress write is due now (and claims the slot if so).
    fn take_slot(&self) -> bool {
        let now = Instant::now();
        let mut last = self.last_write.lock().unwrap_or_else(|p| p.into_inner());
        match *last {
            Some(t) if now.duration_since(t) < self.interval => false,
            _ => {
                *last = Some(now);
                true
            }
        }
    }
}

#[async_trait::async_trait]
impl Reporter for StoreReporter {
    async fn progress(&self, fraction: f64, message: &str) -> Result<(), ReportError> {
        if self.loss.lost.is_cancelled() {
            return Err(ReportError::LeaseLost);
        }
        // The first final report is always written; any other only when the slot is free.
        let first_final = fraction >= 1.0 && !self.final_written.swap(true, Ordering::SeqCst);
        if !self.take_slot() && !first_final {
            return Ok(());
        }
        let message = bounded_message(message);
        match crate::timeouts::db_call(self.write_bound, self.store.progress(&self.holder, fraction, message)).await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.map(e).await),
        }
    }

    async fn artifact(&self, artifact: Artifact) -> Result<(), ReportError> {
        if self.loss.lost.is_cancelled() {
            return Err(ReportError::LeaseLost);
        }
        match crate::timeouts::db_call(self.write_bound, self.store.artifact(&self.holder, &artifact)).await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.map(e).await),
        }
    }

    async fn store_artifact(
        &self,
        name: &str,
        body: ArtifactBody,
        media_type: Option<&str>,
    ) -> Result<Artifact, ReportError> {
        if self.loss.lost.is_cancelled() {
            return Err(ReportError::LeaseLost);
        }
        let Some((store, run_id, attempt)) = &self.artifacts else {
            return DiscardReporter.store_artifact(name, body, media_type).await;
        };
        let unavailable = |e: rara_artifacts::Error| ReportError::Unavailable(format!("artifact {name:?}: {e}"));
        let key = Key::artifact(*run_id, self.holder.step_id, *attempt, name).map_err(unavailable)?;
        let stored = store.put(&key, body, media_type).await.map_err(unavailable)?;
        let artifact = Artifact {
            name: name.to_owned(),
            uri: stored.uri,
            media_type: stored.media_type,
            size_bytes: i64::try_from(stored.size_bytes).ok(),
            digest: Some(stored.digest),
        };
        self.artifact(artifact.clone()).await?;
        Ok(artifact)
    }

    async fn version(&self, version: &str) -> Result<(), ReportError> {
        if self.loss.lost.is_cancelled() {
            return Err(ReportError::LeaseLost);
        }
        match crate::timeouts::db_call(self.write_bound, self.store.attempt_version(&self.holder, version)).await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.map(e).await),
        }
    }
}

/// `message` cut to [`MAX_PROGRESS_MESSAGE_BYTES`](rara_remote::bounds::MAX_PROGRESS_MESSAGE_BYTES).
fn bounded_message(message: &str) -> &str {
    let bound = rara_remote::bounds::MAX_PROGRESS_MESSAGE_BYTES;
    if message.len() <= bound {
        return message;
    }
    let mut end = bound;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    &message[..end]
}

/// How long reading why a lease was lost may delay the stop.
const WHY_LOST_BOUND: Duration = Duration::from_secs(1);

/// How an execution is told that its lease is gone: the reason first (read from the store:
/// cancelled by an operator, the run cancelled, taken over, reaped), then the token.
#[derive(Debug, Clone)]
pub struct Loss {
    pub lost: CancellationToken,
    pub reason: StopReason,
}

impl Loss {
    /// Records why `holder` lost its step, then fires the token.
    pub async fn lose(&self, store: &Store, holder: &Holder) {
        if !self.lost.is_cancelled() {
            // Bounded: the reason must never hold up the stop.
            let reason = match tokio::time::timeout(WHY_LOST_BOUND, store.why_lost(holder)).await {
                Ok(Ok(reason)) => reason,
                _ => "rara lost the step's lease".into(),
            };
            self.reason.set(reason);
        }
        self.lost.cancel();
    }
}
