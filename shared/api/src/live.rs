//! One Postgres listener on [`rara_store::browse::CONSOLE_CHANNEL`] per server, started by the
//! first SSE subscriber, fanned out to every stream through a broadcast channel. A page is told
//! which run changed and re-renders what it shows; nothing polls.

use std::time::Duration;

use rara_store::Store;
use rara_store::browse::ConsoleListener;
use tokio::sync::{OnceCell, broadcast};
use uuid::Uuid;

/// What a subscriber hears: a run that changed, or [`Uuid::nil`] when changes may have been
/// missed (the listener reconnected, or the subscriber fell behind) and everything is stale.
pub const RESYNC: Uuid = Uuid::nil();

/// How long the listener waits before reconnecting after a failure.
const RECONNECT: Duration = Duration::from_secs(1);

/// Buffered changes per subscriber before it is told to resync.
const BUFFER: usize = 256;

#[derive(Debug)]
pub struct Live {
    store: Store,
    sender: OnceCell<broadcast::Sender<Uuid>>,
}

impl Live {
    pub fn new(store: Store) -> Self {
        Live { store, sender: OnceCell::new() }
    }

    /// A receiver of changes; the listener starts with the first one, which hears every change
    /// committed after this returns (the first listener is connected before it does).
    pub async fn subscribe(&self) -> broadcast::Receiver<Uuid> {
        let sender = self
            .sender
            .get_or_init(|| async {
                let (sender, _) = broadcast::channel(BUFFER);
                let first = match self.store.listen_console().await {
                    Ok(listener) => Some(listener),
                    Err(e) => {
                        tracing::warn!(error = %e, "the console cannot listen for changes; retrying");
                        None
                    }
                };
                tokio::spawn(listen(self.store.clone(), sender.clone(), first));
                sender
            })
            .await;
        sender.subscribe()
    }
}

/// Relays notifications for as long as the server lives (a new subscriber should not wait for
/// a connection), reconnecting after a failure and telling subscribers to resync.
async fn listen(store: Store, sender: broadcast::Sender<Uuid>, mut first: Option<ConsoleListener>) {
    loop {
        let listener = match first.take() {
            Some(listener) => Ok(listener),
            None => store.listen_console().await,
        };
        match listener {
            Ok(mut listener) => loop {
                match listener.recv().await {
                    Ok(run) => {
                        let _ = sender.send(run);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the console's listener lost its connection; reconnecting");
                        break;
                    }
                }
            },
            Err(e) => tracing::warn!(error = %e, "the console cannot listen for changes; retrying"),
        }
        let _ = sender.send(RESYNC);
        tokio::time::sleep(RECONNECT).await;
    }
}
