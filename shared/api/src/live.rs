//! One Postgres listener on [`rara_store::browse::CONSOLE_CHANNEL`] per server, started by the
//! first SSE subscriber, fanned out to every stream through a broadcast channel. A page is told
//! which run changed and re-renders what it shows; nothing polls.
//!
//! Postgres notifies the console's channel only while a console listener is registered
//! (migration `…000013_console_listeners.sql`): the server registers when a page subscribes,
//! refreshes the registration while pages are open and ends it when none is, so a database
//! nobody watches pays no notification on its hot path.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rara_store::Store;
use rara_store::browse::ConsoleListener;
use tokio::sync::{OnceCell, broadcast};
use tokio::time::Instant;
use uuid::Uuid;

/// What a subscriber hears: a run that changed, or [`Uuid::nil`] when changes may have been
/// missed (the listener reconnected, or the subscriber fell behind) and everything is stale.
pub const RESYNC: Uuid = Uuid::nil();

/// How long the listener waits before reconnecting after a failure.
const RECONNECT: Duration = Duration::from_secs(1);

/// Buffered changes per subscriber before it is told to resync.
const BUFFER: usize = 256;

/// How long a registration lasts unless it is refreshed (a frozen Lambda container stops
/// refreshing; its registration lapses and notifications stop).
const REGISTRATION: Duration = Duration::from_secs(60);

/// How often the registration is refreshed while pages listen (or ended when none does).
const REFRESH: Duration = Duration::from_secs(20);

/// How long after turning notifications on the pages reload once: a change whose statement
/// ran just before the registration may commit after it, and was not notified.
const SETTLE: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub struct Live {
    store: Store,
    sender: OnceCell<broadcast::Sender<Uuid>>,
    registration: Arc<Registration>,
}

impl Live {
    pub fn new(store: Store) -> Self {
        let registration = Arc::new(Registration { store: store.clone(), id: Uuid::new_v4(), until: Mutex::new(None) });
        Live { store, sender: OnceCell::new(), registration }
    }

    /// A receiver of changes; the listener starts with the first one, which hears every change
    /// committed after this returns (the first listener is connected, and the listener
    /// registered, before it does).
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
                tokio::spawn(refresh(self.registration.clone(), sender.clone()));
                sender
            })
            .await;
        let receiver = sender.subscribe();
        self.registration.ensure(sender, false).await;
        receiver
    }
}

/// This server's registration as a console listener.
#[derive(Debug)]
struct Registration {
    store: Store,
    id: Uuid,
    /// Until when it lasts, as far as this server knows (`None`: not registered).
    until: Mutex<Option<Instant>>,
}

impl Registration {
    /// Registers, or refreshes the registration when `always` or when less than a refresh
    /// interval of it is left. When that turned notifications on, every subscriber reloads
    /// after [`SETTLE`].
    async fn ensure(&self, sender: &broadcast::Sender<Uuid>, always: bool) {
        let now = Instant::now();
        let lasting = self.until.lock().ok().and_then(|until| *until).is_some_and(|until| until > now + REFRESH);
        if lasting && !always {
            return;
        }
        match self.store.register_console_listener(self.id, REGISTRATION).await {
            Ok(turned_on) => {
                if let Ok(mut until) = self.until.lock() {
                    *until = Some(now + REGISTRATION);
                }
                if turned_on {
                    let sender = sender.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(SETTLE).await;
                        let _ = sender.send(RESYNC);
                    });
                }
            }
            Err(e) => tracing::warn!(error = %e, "the console cannot register for changes; pages will not update"),
        }
    }

    /// Ends the registration, if there is one.
    async fn end(&self) {
        let registered = self.until.lock().ok().and_then(|mut until| until.take()).is_some();
        if registered && let Err(e) = self.store.unregister_console_listener(self.id).await {
            tracing::warn!(error = %e, "the console cannot end its registration; it lapses by itself");
        }
    }
}

/// Keeps the registration while pages listen, and ends it when none does.
async fn refresh(registration: Arc<Registration>, sender: broadcast::Sender<Uuid>) {
    loop {
        tokio::time::sleep(REFRESH).await;
        if sender.receiver_count() > 0 {
            registration.ensure(&sender, true).await;
        } else {
            registration.end().await;
        }
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
