//! The scheduler's wake-ups: a `NOTIFY` on [`rara_store::DUE_CHANNEL`] heard on a connection
//! of its own.

use std::sync::Arc;
use std::time::Duration;

use rara_store::{DueListener, Store};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::Scheduler;

impl Scheduler {
    /// Listens on [`rara_store::DUE_CHANNEL`] on a connection of its own (the passes keep
    /// the pool) and wakes the loop on every notification. Notifications that arrive during
    /// a pass leave one wake-up pending, so none is missed and a burst costs one extra pass.
    /// While listening fails the loop still polls; the listener tries again every poll
    /// interval and wakes the loop once it is back (notifications may have been missed).
    pub(super) fn spawn_listener(&self, woken: Arc<Notify>, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
        let store = self.store.clone();
        let retry = self.settings.scheduler_poll.max(Duration::from_millis(100));
        tokio::spawn(async move {
            let mut listener: Option<DueListener> = None;
            let mut failing = false;
            loop {
                // Stop first: a listener that always has a notification ready still stops.
                tokio::select! {
                    biased;
                    _ = stop.cancelled() => break,
                    result = next_notification(&store, &mut listener) => match result {
                        Ok(()) => {
                            failing = false;
                            woken.notify_one();
                        }
                        Err(e) => {
                            if !failing {
                                tracing::warn!(error = %e, "cannot listen for due steps; polling until it can");
                            }
                            failing = true;
                            listener = None;
                            tokio::select! {
                                _ = tokio::time::sleep(retry) => {}
                                _ = stop.cancelled() => break,
                            }
                        }
                    },
                }
            }
            // Closing waits for its connection: a silent Postgres gets the last-call bound.
            if let Some(listener) = listener {
                let _ = tokio::time::timeout(crate::interrupt::LAST_CALL_BOUND, listener.close()).await;
            }
        })
    }
}

/// Waits for the next notification, listening first when needed ([`Store::listen_due`]). A
/// fresh listener counts as a notification: anything sent while there was none is lost.
async fn next_notification(store: &Store, listener: &mut Option<DueListener>) -> Result<(), rara_store::Error> {
    match listener {
        Some(l) => l.recv().await,
        None => {
            *listener = Some(store.listen_due().await?);
            Ok(())
        }
    }
}
