//! The scheduler's transitions: lease due steps, give a lease back when its message could
//! not be sent, and reap leases that expired with their message gone.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};

use rara_domain::StepError;
use rara_domain::step_error::codes;
use uuid::Uuid;

use crate::outcome::dependency_failed;
use crate::{Error, Store, millis, sql};

/// A step the scheduler leased; its message carries `step_id` and `lease_token`, and its run's
/// trace context (DESIGN.md "Tracing").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leased {
    pub step_id: Uuid,
    pub run_id: Uuid,
    pub lease_token: Uuid,
    pub operation: String,
    /// The attempt the claim will run (the next one; the same one for a detached attempt).
    pub attempt: i32,
    /// The run's W3C `traceparent` (`None` for a run from before tracing).
    pub trace_context: Option<String>,
}

/// The fewest concurrency keys one lease round considers (`sql/lease_due.sql`, `$5`): a round
/// of `limit` steps considers `max(limit, LEASE_KEYS_MIN)` keys with due steps, whatever their
/// number; the others wait for a later round (journal `2026-12-06-lease-with-10000-keys.md`).
pub const LEASE_KEYS_MIN: u32 = 1000;

/// Where the next lease round's window of keys starts: after the key the last one ended at.
/// Per store (per scheduler process): two schedulers each walk every key in turn.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cursor(Arc<Mutex<Option<String>>>);

impl Cursor {
    fn get(&self) -> Option<String> {
        self.0.lock().map(|c| c.clone()).unwrap_or_default()
    }

    fn set(&self, key: Option<String>) {
        if let Ok(mut c) = self.0.lock() {
            *c = key;
        }
    }
}

/// A row of `sql/lease_due.sql`: a leased step, or none (nothing was leased), and the key the
/// round's window ended at.
struct Row {
    step_id: Option<Uuid>,
    run_id: Option<Uuid>,
    lease_token: Option<Uuid>,
    operation: Option<String>,
    attempt: Option<i32>,
    trace_context: Option<String>,
    window_end: Option<String>,
}

impl Row {
    fn leased(self) -> Option<Leased> {
        Some(Leased {
            step_id: self.step_id?,
            run_id: self.run_id?,
            lease_token: self.lease_token?,
            operation: self.operation?,
            attempt: self.attempt?,
            trace_context: self.trace_context,
        })
    }
}

/// What one reaper pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Reaped {
    /// Leased steps whose message never claimed them: back to pending, no attempt used.
    pub released_leased: u64,
    /// Running steps whose holder vanished, with attempts left: back to pending.
    pub released_running: u64,
    /// Running steps whose holder vanished on their last attempt: failed with `LEASE_EXPIRED`.
    pub failed: u64,
}

impl Reaped {
    pub fn total(&self) -> u64 {
        self.released_leased + self.released_running + self.failed
    }
}

/// The lease transaction's settings (`SET LOCAL`, one round trip): its statement's generic
/// plan, and a commit that returns once its WAL is written, not flushed. That is safe because
/// a lease lost in a crash leaves its steps as they were before, due, and its messages stale
/// (the token is random and never drawn again), while anything that acts on a lease with
/// effects outside waits for a flush of its own first, which covers the lease's WAL too
/// (`docs/src/internals/quick-steps.md`, "Durability"; priced in
/// `docs/benchmarks/journal/2026-12-07-lease-without-the-flush.md`).
const LEASE_SESSION: &str = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true), \
                             set_config('synchronous_commit', 'off', true)";

impl Store {
    /// Leases up to `limit` due steps for `holder` in one statement, under flow control
    /// (`sql/lease_due.sql`): fair share between concurrency keys, higher priority first,
    /// then oldest; no key over its limits or rate; nothing paused. At most
    /// `max(limit, LEASE_KEYS_MIN)` keys are considered, the window after the one the last
    /// round ended at.
    pub async fn lease_due(&self, holder: &str, limit: u32, lease: Duration) -> Result<Vec<Leased>, Error> {
        self.lease_due_at(holder, limit, lease, None).await
    }

    /// [`lease_due`](Self::lease_due) as if the time were `at` (`None`: now): tests drive rate
    /// limits and due times with it.
    pub async fn lease_due_at(
        &self,
        holder: &str,
        limit: u32,
        lease: Duration,
        at: Option<DateTime<Utc>>,
    ) -> Result<Vec<Leased>, Error> {
        // The statement is large: planned afresh for its parameters (Postgres' choice, since
        // the generic plan's estimate is higher) it costs milliseconds of planning per round,
        // five times what it runs for. Its generic plan is right whatever the parameters
        // (`tests/explain.rs`), so this transaction asks for it.
        // Its commit does not wait for the WAL flush ([`LEASE_SESSION`] says why).
        let mut tx = self.pool.begin().await?;
        sqlx::query(LEASE_SESSION).execute(&mut *tx).await?;
        let window = i64::from(limit.max(LEASE_KEYS_MIN));
        let after = self.lease_cursor.get();
        let rows =
            sqlx::query_file_as!(Row, "sql/lease_due.sql", i64::from(limit), holder, millis(lease), at, window, after)
                .fetch_all(&mut *tx)
                .await?;
        tx.commit().await?;
        self.lease_cursor.set(rows.first().and_then(|r| r.window_end.clone()));
        Ok(rows.into_iter().filter_map(Row::leased).collect())
    }

    /// Gives leases back (their messages could not be sent): the steps are due again at once.
    /// A lease that changed meanwhile is left alone. Returns how many were released.
    pub async fn release(&self, leases: &[(Uuid, Uuid)]) -> Result<u64, Error> {
        let (ids, tokens): (Vec<Uuid>, Vec<Uuid>) = leases.iter().copied().unzip();
        Ok(sqlx::query_file!("sql/release.sql", &ids, &tokens).execute(&self.pool).await?.rows_affected())
    }

    /// Returns steps whose lease expired (DESIGN.md "Lease ownership", the reaper): leased ones
    /// and running ones with attempts left go back to pending with their token cleared (any
    /// late message is stale); running ones on their last attempt fail with `LEASE_EXPIRED`.
    pub async fn reap_expired(&self, limit: u32) -> Result<Reaped, Error> {
        let error =
            StepError::retryable(codes::LEASE_EXPIRED, "the holder's lease expired before it recorded an outcome")
                .to_json();
        let back = sqlx::query_file!("sql/reap_release.sql", i64::from(limit), error).fetch_one(&self.pool).await?;

        let final_error =
            StepError::permanent(codes::LEASE_EXPIRED, "the holder's lease expired on the last attempt").to_json();
        let failed: Vec<Uuid> = sqlx::query_scalar(sql::REAP_FAIL.as_str())
            .bind(i64::from(limit))
            .bind(&final_error)
            .bind(dependency_failed())
            .fetch_all(&self.pool)
            .await?;
        Ok(Reaped {
            released_leased: back.leased as u64,
            released_running: back.running as u64,
            failed: failed.len() as u64,
        })
    }
}
