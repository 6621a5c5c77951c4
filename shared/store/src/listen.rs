//! Listening on a `NOTIFY` channel over a connection of its own (never one of the pool's), and
//! the operator-cancel channel ([`CANCEL_CHANNEL`], fed by the trigger of migration
//! `…000011_cancel_notify.sql`).

use sqlx::PgPool;
use sqlx::postgres::{PgListener, PgPoolOptions};
use uuid::Uuid;

use crate::{Error, Store};

/// The channel a step's holder listens on: the payload is the id of a step that an operator's
/// cancel (of the step or of its run) took from `leased` or `running`, sent at commit. The
/// executor holding it stops it at once instead of at its next heartbeat (DESIGN.md "Cancel
/// says why, and comes first").
pub const CANCEL_CHANNEL: &str = "rara_cancel";

/// Notifications whose payload is an id (a run's, a step's), one per [`recv`](Self::recv).
#[derive(Debug)]
pub struct IdListener {
    listener: PgListener,
    /// The listener's own pool of one connection, so it never holds one of the store's.
    pool: PgPool,
}

impl IdListener {
    /// The next id. A payload that is not a UUID is skipped. After a broken connection it
    /// answers an error once; the next call reconnects (notifications meanwhile are lost).
    pub async fn recv(&mut self) -> Result<Uuid, Error> {
        loop {
            let notification = self.listener.recv().await?;
            if let Ok(id) = Uuid::try_parse(notification.payload()) {
                return Ok(id);
            }
        }
    }

    /// Stops listening and closes its connection.
    pub async fn close(self) {
        drop(self.listener);
        self.pool.close().await;
    }
}

impl Store {
    /// A listener on `channel`, connected with the store's options over a pool of its own.
    pub(crate) async fn listen_on(&self, channel: &str) -> Result<(PgListener, PgPool), Error> {
        let options = self.pool.connect_options().as_ref().clone();
        let pool = PgPoolOptions::new().max_connections(1).connect_lazy_with(options);
        let mut listener = PgListener::connect_with(&pool).await?;
        listener.listen(channel).await?;
        Ok((listener, pool))
    }

    /// Listens on [`CANCEL_CHANNEL`]: each id is a held step an operator cancelled.
    pub async fn listen_cancels(&self) -> Result<IdListener, Error> {
        self.listen_ids(CANCEL_CHANNEL).await
    }

    /// Listens on `channel`, whose payloads are ids.
    pub(crate) async fn listen_ids(&self, channel: &str) -> Result<IdListener, Error> {
        let (listener, pool) = self.listen_on(channel).await?;
        Ok(IdListener { listener, pool })
    }
}
