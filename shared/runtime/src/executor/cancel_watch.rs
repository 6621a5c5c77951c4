//! The holder's side of an operator's cancel: one listener per process on
//! [`rara_store::listen::CANCEL_CHANNEL`], relayed to every running execution's heartbeat
//! ([`CancelWatch`]). The operator's side is `rara_operator::cancel`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rara_store::Store;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// How many cancelled step ids wait for the slowest holder before it lags (and checks at once).
const WATCH_BUFFER: usize = 256;
/// The pause before listening again after the listener failed.
const WATCH_RETRY: Duration = Duration::from_secs(1);
/// How long executions must have been running before the listener connects: a batch of short
/// steps ends sooner and costs no connection (it was a backend forked and torn down per batch,
/// which cost Postgres about as much as the batch's own statements; journal:
/// `docs/benchmarks/journal/2026-12-04-connections-and-round-trips.md`).
pub const WATCH_START_DELAY: Duration = Duration::from_millis(100);
/// Sent to the subscribers once the listener is up (and again after it reconnects): a cancel
/// may have come while nobody listened, so every holder checks its lease once.
pub const CHECK_NOW: Uuid = Uuid::nil();

/// The steps operators cancel, heard on [`rara_store::listen::CANCEL_CHANNEL`] by one listener
/// per process (a connection of its own) while the process runs executions: the first
/// [`subscribe`](Self::subscribe) starts it in the background, connecting after
/// [`WATCH_START_DELAY`] if anyone still subscribes; the last [`Subscription`] dropped stops it
/// and closes its connection. Each execution's heartbeat subscribes and checks its lease at
/// once when its step is named (or [`CHECK_NOW`] comes: the listener just connected), so a
/// step cancelled while it runs stops within milliseconds, not at the next heartbeat. An
/// accelerator only: a notification missed leaves the regular heartbeat to find the cancel.
#[derive(Debug, Clone)]
pub struct CancelWatch {
    store: Store,
    state: Arc<Mutex<WatchState>>,
    /// Connections the listener opened (or tried to).
    connections: Arc<AtomicU64>,
}

#[derive(Debug, Default)]
struct WatchState {
    /// The running relay's channel and stop, while anyone subscribes.
    relay: Option<(broadcast::Sender<Uuid>, CancellationToken)>,
    subscribers: usize,
}

/// One execution's view of the cancels; dropping the last one stops the listener.
#[derive(Debug)]
pub struct Subscription {
    receiver: broadcast::Receiver<Uuid>,
    state: Arc<Mutex<WatchState>>,
}

impl CancelWatch {
    pub fn new(store: Store) -> Self {
        CancelWatch { store, state: Arc::default(), connections: Arc::default() }
    }

    /// Cancelled step ids from now on. The caller never waits for the listener's connection;
    /// must be called inside a Tokio runtime.
    pub fn subscribe(&self) -> Subscription {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (sender, _) = state.relay.get_or_insert_with(|| {
            let (sender, _) = broadcast::channel(WATCH_BUFFER);
            let stop = CancellationToken::new();
            tokio::spawn(relay(self.store.clone(), sender.clone(), stop.clone(), self.connections.clone()));
            (sender, stop)
        });
        let receiver = sender.subscribe();
        state.subscribers += 1;
        Subscription { receiver, state: self.state.clone() }
    }

    /// How many connections the listener has opened or tried to open so far.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }
}

impl Subscription {
    /// The next cancelled step; `Lagged` when some were missed (the caller's may be one).
    pub async fn recv(&mut self) -> Result<Uuid, broadcast::error::RecvError> {
        self.receiver.recv().await
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.subscribers = state.subscribers.saturating_sub(1);
        if state.subscribers == 0
            && let Some((_, stop)) = state.relay.take()
        {
            stop.cancel();
        }
    }
}

/// Relays the cancel notifications to the subscribers until `stop`, listening again after a
/// failure.
async fn relay(store: Store, sender: broadcast::Sender<Uuid>, stop: CancellationToken, connections: Arc<AtomicU64>) {
    tokio::select! {
        () = tokio::time::sleep(WATCH_START_DELAY) => {}
        () = stop.cancelled() => return,
    }
    let mut failing = false;
    while !stop.is_cancelled() {
        connections.fetch_add(1, Ordering::Relaxed);
        let listening = tokio::select! {
            listening = store.listen_cancels() => listening,
            () = stop.cancelled() => return,
        };
        let mut listener = match listening {
            Ok(listener) => listener,
            Err(e) => {
                if !failing {
                    tracing::warn!(error = %e, "cannot listen for cancels; heartbeats find them");
                }
                failing = true;
                tokio::select! {
                    () = tokio::time::sleep(WATCH_RETRY) => {}
                    () = stop.cancelled() => {}
                }
                continue;
            }
        };
        failing = false;
        // What was cancelled before now went unheard: every holder checks once.
        drop(sender.send(CHECK_NOW));
        loop {
            let heard = tokio::select! {
                heard = listener.recv() => heard,
                () = stop.cancelled() => break,
            };
            match heard {
                // No subscriber now is fine: nothing running here.
                Ok(step_id) => drop(sender.send(step_id)),
                Err(e) => {
                    tracing::warn!(error = %e, "the cancel listener broke; listening again");
                    break;
                }
            }
        }
        listener.close().await;
    }
}
