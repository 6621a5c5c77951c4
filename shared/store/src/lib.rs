//! rara's Postgres store: every step transition of DESIGN.md as one statement (or one short
//! transaction), and every write after a claim fenced by holder, fence and status.
//!
//! # Layout
//!
//! - [`submit`]: store a validated workflow plan as a run with its steps (idempotency key aware).
//! - [`lease`]: the scheduler's side: lease due steps (flow control included: keys, limits,
//!   fair share, priority, rates, pauses; one statement), release a lease, reap expired leases.
//! - [`definitions`]: registered workflow definitions, by name and version (the same content is
//!   the same version).
//! - [`grants`]: which workflows and operations may resolve which secrets, towards which
//!   hosts; checked at submit and, cached, at claim.
//! - [`flow`]: flow control's operator side: limits per key or group, pauses of runs, keys
//!   and operations, and what each key holds and has due.
//! - [`claim`]: the executor's batch claim, telling claimed from stale from still-held.
//! - [`quick`]: quick steps: locked, run and recorded in one transaction (no write after the
//!   claim until the success).
//! - [`map`]: fan-out: a map step's expansion into its children (fenced).
//! - [`detach`]: long steps: park a remote attempt that outlives its invocation (fenced);
//!   the detached attempts a cancel must reach.
//! - [`dlq`]: what the steps of dead-lettered messages are now (`rara dlq`).
//! - [`due`]: the due channel: `NOTIFY` when steps become due, a scheduler's listener.
//! - [`listen`]: listening on a channel over a connection of its own, and the operator-cancel
//!   channel ([`listen::CANCEL_CHANNEL`]) a step's holder hears at once.
//! - [`fence`]: the fence rule, written once: the [`Holder`], the predicate every fenced
//!   write composes (one holder, a batch), and zero rows as [`Error::LeaseLost`].
//! - [`running`]: fenced writes while a step runs: heartbeat, progress, artifacts.
//! - [`outcome`]: fenced outcomes: success, retryable failure, permanent failure; and
//!   cancellation. Finishing steps releases or skips dependents and finishes the run.
//! - [`references`]: data flow at claim: what a batch's input references read (one
//!   statement), and the input each attempt ran with (one fenced statement).
//! - [`interrupt`]: a stopping runner gives back the running steps it still holds (fenced).
//! - [`browse`]: what the API and console read: runs by filter and cursor, the console's
//!   live channel ([`browse::CONSOLE_CHANNEL`]).
//! - [`bulk`]: an operator's set-based actions: retry many steps, cancel many runs (and the
//!   detached attempts they hold), one statement per batch.
//! - [`waits`]: durable waits: the scheduler's round (start, decide by timer, timeout, a
//!   signal or event already there, apply), signals, events, completion tokens, what waits.
//! - [`schedules`]: schedules: created, paused, deleted; the scheduler's round that locks the
//!   due ones in one bounded statement and fires their slots (one run per slot, by its key).
//! - [`children`]: child workflows: a child made and waited for, decided when it ends,
//!   cancelled when its parent stops waiting.
//! - [`read`]: a run with its steps, attempts and artifacts, typed (errors, progress).
//! - [`artifacts`]: an artifact by id, with its run (what the API serves).
//! - [`retention`]: bounded history: finished runs older than a retention deleted in batches,
//!   skipping what another transaction holds; what a prune would delete.
//! - [`trace`]: a run's trace context, and the attempts a lease round leased in their runs'
//!   traces (DESIGN.md "Tracing").
//! - [`roles`]: the database roles of migration `…000021` (owner, runtime, console), acting
//!   as one at connect, and who is a member of each.
//! - [`statistics`]: planner statistics of the hot tables, refreshed while they grow.
//! - [`error`]: the store's [`Error`], with the typed [`Error::LeaseLost`].
//! - `testing` (feature `testing`): finished history written in bulk, for tests and benchmarks.
//! - [`sql`]: the catalogue of every statement (the files of `sql/`, composed where they
//!   are composed), with its parameter types; `tests/catalogue.rs` prepares each one.
//!
//! Time always comes from the database (`now()`); durations travel as milliseconds. Error
//! codes and the notification channel are bound as parameters, never written into SQL.
//!
//! # Batches find their rows by primary key
//!
//! A statement that takes a batch of step ids (`unnest(...)`) must reach each step through
//! `steps_pkey`, whatever the table's statistics. Its status condition is therefore written
//! so that the planner cannot infer the predicate of the reaper's partial index
//! `steps_held_lease_expiry` from it: `(s.status = 'running') IS TRUE` (the batch form of
//! the fence predicate, [`fence`]), `(s.status = 'leased') IS TRUE`, or a `CASE` on the
//! status. With a plain `s.status = 'running'`, a table whose statistics show almost no held
//! steps (the normal case: a large history, a few steps in flight) gets a cached generic
//! plan that scans that whole index, live and dead entries, for every batch: hundreds of index
//! reads per step where autovacuum is off (journal: `docs/benchmarks/journal/2026-12-02-soak.md`).
//! The proof is `tests/explain.rs`.
//!
//! And the batch must drive: one probe per step, never `steps` read whole against the batch.
//! Statistics taken while every step was pending say no step is held, and a plain join of
//! the batch with `steps` then walks every held step of the table for each statement (issue
//! 50: batch × backlog). The quick path probes each pair in a lateral subquery with a locking
//! clause; the claim and the fenced writes match the key as `s.id = ANY (ARRAY[i.step_id])`
//! (the claim its lease token the same way), which the planner can neither merge nor hash
//! ([`fence`]). The proofs are `tests/quick_plan.rs` and `tests/outcome_plan.rs`.

pub mod artifacts;
pub mod browse;
pub mod bulk;
pub mod children;
pub mod claim;
pub mod definitions;
pub mod detach;
pub mod dlq;
pub mod due;
pub mod error;
pub mod fence;
pub mod flow;
pub mod grants;
pub mod interrupt;
pub mod lease;
pub mod listen;
pub mod map;
pub mod outcome;
pub mod overview;
pub mod quick;
pub mod read;
pub mod references;
pub mod rerun;
pub mod retention;
pub mod roles;
pub mod running;
pub mod schedules;
pub mod sql;
pub mod statistics;
pub mod submit;
#[cfg(feature = "testing")]
pub mod testing;
pub mod trace;
pub mod waits;

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

pub use due::{DUE_CHANNEL, DueListener};
pub use error::Error;
pub use fence::Holder;

/// The migrations of `migrations/`, embedded at build time.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

/// The Postgres store. Cheap to clone: it holds a pool.
#[derive(Debug, Clone)]
pub struct Store {
    pool: PgPool,
    /// The executor's cache of secret grants and run names ([`grants`]).
    grants: Arc<grants::GrantCache>,
    /// Where the next lease round's window of keys starts ([`lease`]): after this key.
    lease_cursor: lease::Cursor,
}

/// A pooled connection idle for longer than this is checked (one round trip) before it is
/// used: a thawed Lambda container's connections may have been closed while it was frozen.
pub const CHECK_IF_IDLE_FOR: Duration = Duration::from_secs(1);

/// What every rara session sets when it connects. `jit = off`: Postgres compiles a statement
/// with LLVM whenever its *estimated* cost passes `jit_above_cost`, at every execution (the
/// compiled code is not kept with a cached plan), and rara's statements run in about a
/// millisecond. The scheduler's lease (a generic plan, whose estimate grows with `steps`) spent
/// nearly all its time compiling once `steps` grew, many times its own run time a call
/// (journal: `docs/benchmarks/journal/2026-12-04-jit-and-notifications.md`).
///
/// `enable_seqscan = off`: every statement of rara reaches its rows through an index (the
/// batches by primary key, the lease and the reaper by their partial indexes, the prune by the
/// finished runs'), but a prepared statement keeps the generic plan made on the statistics of
/// the moment, and on a fresh database the first analyze of `step_attempts` sees a few hundred
/// rows: the claim and the outcome then read the whole table at every batch until the next
/// analyze (journal: `docs/benchmarks/journal/2026-12-05-attempts-by-primary-key.md`;
/// `tests/explain.rs`). Off, Postgres still scans a table that has no index to use; it only
/// never prefers a scan to an index that serves.
pub const SESSION_SETTINGS: &str = "SET jit = off; SET enable_seqscan = off";

/// `options` for an executor's sessions: every prepared statement runs its generic plan
/// (`plan_cache_mode = force_generic_plan`), planned once per connection. By default Postgres
/// plans a statement afresh at each execution while that custom plan looks cheaper than the
/// generic one, and the executor's batch statements take arrays whose length Postgres cannot
/// know: at one step per invocation (batch 1, one step per message) the custom plan of a
/// one-element array always looks cheaper, and planning was most of the Postgres CPU such a
/// step took (journal: `docs/benchmarks/journal/2026-12-07-generic-plans.md`). The generic
/// plans reach their rows through the same indexes (`tests/explain.rs` holds them).
/// The scheduler leases with generic plans too ([`lease`]); the API's searches keep custom
/// plans, which drop the filters a search does not give.
pub fn executor_session(options: PgConnectOptions) -> PgConnectOptions {
    options.options([("plan_cache_mode", "force_generic_plan")])
}

/// Pool options every rara pool starts from: each new connection gets [`SESSION_SETTINGS`];
/// a connection is checked before use only when it was idle for [`CHECK_IF_IDLE_FOR`]. sqlx
/// checks every connection when it is released already; checking it again when it is taken,
/// moments later, was a third round trip per statement on the executor's path (two
/// statements per batch).
pub fn pool_options() -> PgPoolOptions {
    PgPoolOptions::new()
        .after_connect(|connection, _| {
            Box::pin(async move {
                sqlx::Executor::execute(connection, SESSION_SETTINGS).await?;
                Ok(())
            })
        })
        .test_before_acquire(false)
        .before_acquire(|connection, meta| {
            Box::pin(async move {
                if meta.idle_for >= CHECK_IF_IDLE_FOR {
                    use sqlx::Connection;
                    connection.ping().await?;
                }
                Ok(true)
            })
        })
}

impl Store {
    pub fn new(pool: PgPool) -> Self {
        Self { pool, grants: Arc::default(), lease_cursor: lease::Cursor::default() }
    }

    /// Connects with a small pool (a Lambda container needs one or two connections).
    pub async fn connect(database_url: &str, max_connections: u32) -> Result<Self, Error> {
        let pool = pool_options()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(10))
            .connect(database_url)
            .await?;
        Ok(Self::new(pool))
    }

    /// Like [`connect`](Self::connect), with options built in code (e.g. from a secret), so
    /// no URL holding the password is ever formed.
    pub async fn connect_with(options: PgConnectOptions, max_connections: u32) -> Result<Self, Error> {
        let pool = pool_options()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await?;
        Ok(Self::new(pool))
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
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
