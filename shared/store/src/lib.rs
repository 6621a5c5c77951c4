//! rara's Postgres store: every step transition of DESIGN.md as one statement (or one short
//! transaction), and every write after a claim fenced by holder, fence and status.
//!
//! # Layout
//!
//! - [`submit`]: store a validated workflow plan as a run with its steps (idempotency key aware).
//! - [`lease`]: the scheduler's side: lease due steps, release a lease, reap expired leases.
//! - [`claim`]: the executor's batch claim, telling claimed from stale from still-held.
//! - [`running`]: fenced writes while a step runs: heartbeat, progress, artifacts.
//! - [`outcome`]: fenced outcomes: success, retryable failure, permanent failure; and
//!   cancellation. Finishing steps releases or skips dependents and finishes the run.
//! - [`read`]: a run with its steps, attempts and artifacts.
//! - [`statistics`]: planner statistics of the hot tables, refreshed while they grow.
//! - [`error`]: the store's [`Error`], with the typed [`Error::LeaseLost`].
//!
//! Time always comes from the database (`now()`); durations travel as milliseconds.
//!
//! # Batches find their rows by primary key
//!
//! A statement that takes a batch of step ids (`unnest(...)`) must reach each step through
//! `steps_pkey`, whatever the table's statistics. Its status condition is therefore written
//! so that the planner cannot infer the predicate of the reaper's partial index
//! `steps_held_lease_expiry` from it: `(s.status = 'running') IS TRUE`, or a `CASE` on the
//! status. With a plain `s.status = 'running'`, a table whose statistics show almost no held
//! steps (the normal case: a large history, a few steps in flight) gets a cached generic
//! plan that scans that whole index, live and dead entries, for every batch: measured at
//! hundreds of index reads per step, and 64 steps/s instead of 3,000 where autovacuum was
//! off. The proof is `tests/explain.rs`.

pub mod claim;
pub mod error;
pub mod lease;
pub mod outcome;
pub mod read;
pub mod running;
pub mod statistics;
pub mod submit;
#[cfg(feature = "testing")]
pub mod testing;

use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

pub use error::Error;

/// The channel a `NOTIFY` goes to whenever steps become due now (a submission, dependents
/// released by a success, a retry by hand), so a listening scheduler leases them within
/// milliseconds instead of at its next poll. The payload is empty: the notification only
/// says "look"; the lease statement decides what is due.
pub const DUE_CHANNEL: &str = "rara_due";

/// The migrations of `migrations/`, embedded at build time.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

/// Who holds a running step: the triple every write after the claim is conditional on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Holder {
    pub step_id: uuid::Uuid,
    /// The worker identity that claimed the step (`leased_by`).
    pub worker: String,
    /// The fence issued at the claim.
    pub fence: i64,
}

/// The Postgres store. Cheap to clone: it holds a pool.
#[derive(Debug, Clone)]
pub struct Store {
    pool: PgPool,
}

impl Store {
    pub fn new(pool: PgPool) -> Self {
        Self { pool }
    }

    /// Connects with a small pool (a Lambda container needs one or two connections).
    pub async fn connect(database_url: &str, max_connections: u32) -> Result<Self, Error> {
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(10))
            .connect(database_url)
            .await?;
        Ok(Self { pool })
    }

    /// Like [`connect`](Self::connect), with options built in code (e.g. from a secret), so
    /// no URL holding the password is ever formed.
    pub async fn connect_with(options: PgConnectOptions, max_connections: u32) -> Result<Self, Error> {
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await?;
        Ok(Self { pool })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Tells listening schedulers that steps are due (see [`DUE_CHANNEL`]).
    pub async fn notify_due(&self) -> Result<(), Error> {
        sqlx::query("SELECT pg_notify($1, '')").bind(DUE_CHANNEL).execute(&self.pool).await?;
        Ok(())
    }

    /// Applies pending migrations; applying them twice changes nothing.
    pub async fn migrate(&self) -> Result<(), Error> {
        MIGRATOR.run(&self.pool).await?;
        Ok(())
    }
}

/// A duration as whole milliseconds for SQL (`$n * interval '1 millisecond'`).
pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
