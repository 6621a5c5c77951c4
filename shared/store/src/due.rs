//! The due channel: a `NOTIFY` whenever steps become due now (a submission, dependents
//! released by a success, a retry by hand), so a listening scheduler leases them within
//! milliseconds instead of at its next poll.

use sqlx::PgPool;
use sqlx::postgres::PgListener;

use crate::{Error, Store};

/// The channel of the due notifications. The payload is empty: a notification only says
/// "look"; the lease statement decides what is due. Statements take it as a parameter.
pub const DUE_CHANNEL: &str = "rara_due";

/// Listens on [`DUE_CHANNEL`] over a connection of its own ([`Store::listen_due`]).
#[derive(Debug)]
pub struct DueListener {
    listener: PgListener,
    /// The listener's own pool of one connection, so it never holds one of the store's.
    pool: PgPool,
}

impl DueListener {
    /// Waits for the next notification. After a broken connection it answers an error once;
    /// the next call reconnects (notifications sent meanwhile are lost).
    pub async fn recv(&mut self) -> Result<(), Error> {
        self.listener.recv().await?;
        Ok(())
    }

    /// Stops listening and closes its connection.
    pub async fn close(self) {
        drop(self.listener);
        self.pool.close().await;
    }
}

impl Store {
    /// Tells listening schedulers that steps are due (see [`DUE_CHANNEL`]).
    pub async fn notify_due(&self) -> Result<(), Error> {
        sqlx::query_file!("sql/notify_due.sql", DUE_CHANNEL).execute(&self.pool).await?;
        Ok(())
    }

    /// Listens on [`DUE_CHANNEL`] on a connection of its own, opened with the store's
    /// connection options: the listener never takes one of the pool's connections.
    pub async fn listen_due(&self) -> Result<DueListener, Error> {
        let (listener, pool) = self.listen_on(DUE_CHANNEL).await?;
        Ok(DueListener { listener, pool })
    }
}
