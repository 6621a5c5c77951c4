//! What the HTTP API and the console read beyond `read.rs`: runs filtered by status,
//! workflow name and version, creation time, error code and input fields ([`RunFilter`]), a
//! page at a time behind an opaque cursor; and the console's live
//! channel ([`CONSOLE_CHANNEL`], fed by the triggers of migration `…000009_console.sql` while a
//! console listener is registered, migration `…000013_console_listeners.sql`).

use chrono::{DateTime, Utc};
use rara_domain::state::RunStatus;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{Error, Store};

/// The channel the console listens on: the payload is the id of a run that changed (its status,
/// or a step's status or progress), sent at commit.
pub const CONSOLE_CHANNEL: &str = "rara_console";

/// Which runs to list, newest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunFilter {
    pub status: Option<RunStatus>,
    /// The workflow name, exactly.
    pub name: Option<String>,
    /// Created at or after.
    pub created_after: Option<DateTime<Utc>>,
    /// Created before.
    pub created_before: Option<DateTime<Utc>>,
    /// The registered version the run was made from (with `name`; ignored without it).
    pub version: Option<i32>,
    /// Runs with a step that failed or was cancelled with this error code (a skipped step's
    /// `DEPENDENCY_FAILED` is not searched: its failed dependency's code is).
    pub error_code: Option<String>,
    /// Runs whose inputs contain this document (`inputs @> doc`, e.g. `{"tenant": "acme"}`).
    /// Inputs stored by reference (`{"$stored": …}`) contain only the reference.
    pub inputs: Option<serde_json::Value>,
}

/// Where a page ends: the last run it showed (runs are ordered by creation time, then id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub created_at: DateTime<Utc>,
    pub id: Uuid,
}

/// A cursor that is not one this store wrote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a cursor of a runs page")]
pub struct BadCursor;

impl Cursor {
    /// Opaque and URL-safe: `<microseconds since the epoch>.<run id>`.
    pub fn encode(&self) -> String {
        format!("{}.{}", self.created_at.timestamp_micros(), self.id.simple())
    }

    pub fn decode(text: &str) -> Result<Self, BadCursor> {
        let (micros, id) = text.split_once('.').ok_or(BadCursor)?;
        let created_at = micros.parse().ok().and_then(DateTime::from_timestamp_micros).ok_or(BadCursor)?;
        let id = Uuid::try_parse(id).map_err(|_| BadCursor)?;
        Ok(Cursor { created_at, id })
    }
}

/// One page of runs, and the cursor of the next page when there is one.
#[derive(Debug, Clone, PartialEq)]
pub struct RunPage {
    pub runs: Vec<RunSummary>,
    pub next: Option<Cursor>,
}

impl Store {
    /// Up to `limit` runs matching `filter`, newest first, after `after` (a previous page's
    /// [`RunPage::next`]).
    pub async fn browse_runs(&self, filter: &RunFilter, after: Option<Cursor>, limit: u32) -> Result<RunPage, Error> {
        let mut runs = sqlx::query_file_as!(
            RunSummary,
            "sql/browse_runs.sql",
            filter.status as Option<RunStatus>,
            filter.name.as_deref(),
            filter.created_after,
            filter.created_before,
            after.map(|c| c.created_at),
            after.map(|c| c.id),
            i64::from(limit) + 1,
            filter.version,
            filter.error_code.as_deref(),
            filter.inputs.as_ref(),
        )
        .fetch_all(&self.pool)
        .await?;
        let next = if runs.len() > limit as usize {
            runs.truncate(limit as usize);
            runs.last().map(|r| Cursor { created_at: r.created_at, id: r.id })
        } else {
            None
        };
        Ok(RunPage { runs, next })
    }

    /// The ids of every unfinished run matching `filter` (what a bulk cancel would touch).
    pub async fn running_runs(&self, filter: &RunFilter) -> Result<Vec<Uuid>, Error> {
        Ok(sqlx::query_file_scalar!(
            "sql/running_runs.sql",
            filter.status as Option<RunStatus>,
            filter.name.as_deref(),
            filter.created_after,
            filter.created_before,
            filter.version,
            filter.error_code.as_deref(),
            filter.inputs.as_ref(),
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// The failed or cancelled steps of the runs matching `filter` (what a bulk retry would
    /// give a new budget): steps that were skipped come back with them.
    pub async fn retryable_steps(&self, filter: &RunFilter) -> Result<Vec<Uuid>, Error> {
        Ok(sqlx::query_file_scalar!(
            "sql/retryable_steps.sql",
            filter.status as Option<RunStatus>,
            filter.name.as_deref(),
            filter.created_after,
            filter.created_before,
            filter.version,
            filter.error_code.as_deref(),
            filter.inputs.as_ref(),
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// Each step's input as stored (secret references stay references), by step id.
    pub async fn step_inputs(&self, run_id: Uuid) -> Result<Vec<(Uuid, serde_json::Value)>, Error> {
        Ok(sqlx::query_file!("sql/step_inputs.sql", run_id)
            .fetch_all(&self.pool)
            .await?
            .into_iter()
            .map(|r| (r.id, r.input))
            .collect())
    }

    /// A run's status, or [`Error::RunNotFound`] (cheaper than reading the whole run).
    pub async fn run_status(&self, run_id: Uuid) -> Result<RunStatus, Error> {
        sqlx::query_file_scalar!("sql/run_status.sql", run_id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or(Error::RunNotFound(run_id))
    }

    /// A run's inputs as submit resolved them, or [`Error::RunNotFound`] (what a rerun replaces,
    /// without reading the run's steps).
    pub async fn run_inputs(&self, run_id: Uuid) -> Result<serde_json::Value, Error> {
        sqlx::query_file_scalar!("sql/run_inputs.sql", run_id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or(Error::RunNotFound(run_id))
    }

    /// Registers the console listener `id` (or refreshes it) for `ttl`: while any
    /// registration lasts, every change is notified on [`CONSOLE_CHANNEL`]; while none does,
    /// nothing is, and the hot path pays nothing: the console's triggers are enabled here, when
    /// they are not (migration `…000016`). Answers whether this turned notifications on: a
    /// change whose statement ran just before may then commit after, not notified, and a
    /// listener should reload what it shows a moment later.
    pub async fn register_console_listener(&self, id: Uuid, ttl: std::time::Duration) -> Result<bool, Error> {
        let registered: bool =
            sqlx::query_file_scalar!("sql/console_register.sql", id, crate::millis(ttl)).fetch_one(&self.pool).await?;
        let enabled = self.console_notifications(true).await?;
        Ok(registered || enabled)
    }

    /// Ends the registration of the console listener `id` (and any that expired), and
    /// disables the console's triggers when no other registration lasts.
    pub async fn unregister_console_listener(&self, id: Uuid) -> Result<(), Error> {
        sqlx::query_file!("sql/console_unregister.sql", id).execute(&self.pool).await?;
        self.quiet_console().await?;
        Ok(())
    }

    /// Disables the console's triggers if no console registration lasts (a console whose
    /// container froze lets its registration lapse without ending it): the scheduler's
    /// maintenance calls it. Answers whether it disabled them.
    pub async fn quiet_console(&self) -> Result<bool, Error> {
        self.console_notifications(false).await
    }

    /// `rara_console_notifications(wanted)` (migration `…000016`): whether it changed them.
    async fn console_notifications(&self, wanted: bool) -> Result<bool, Error> {
        Ok(sqlx::query_file_scalar!("sql/console_notifications.sql", wanted).fetch_one(&self.pool).await?)
    }

    /// Listens on [`CONSOLE_CHANNEL`] over a connection of its own (never one of the pool's).
    /// Nothing is notified unless a listener is registered
    /// ([`register_console_listener`](Self::register_console_listener)).
    /// Each [`recv`](ConsoleListener::recv) is a run that changed; after a broken connection a
    /// page reloads what it shows (changes meanwhile are lost).
    pub async fn listen_console(&self) -> Result<ConsoleListener, Error> {
        self.listen_ids(CONSOLE_CHANNEL).await
    }
}

/// The console's live channel: each `recv` is a run that changed.
pub type ConsoleListener = crate::listen::IdListener;

/// A link between a child run and the step that made it: the step's run and name, and the
/// attempt (each attempt of the step makes its own child); `run_id` is the other run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunLink {
    pub run_id: Uuid,
    pub step: String,
    pub attempt: i32,
}

/// One line of `rara list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub id: Uuid,
    pub name: String,
    pub status: RunStatus,
    pub steps_total: i32,
    pub steps_finished: i32,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl Store {
    /// The most recent runs, newest first, optionally only those in `status`.
    pub async fn list_runs(&self, status: Option<RunStatus>, limit: u32) -> Result<Vec<RunSummary>, Error> {
        Ok(sqlx::query_file_as!(RunSummary, "sql/list_runs.sql", status as Option<RunStatus>, i64::from(limit))
            .fetch_all(&self.pool)
            .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_what_it_wrote_and_refuses_anything_else() {
        let cursor =
            Cursor { created_at: DateTime::from_timestamp_micros(1_764_800_000_123_456).unwrap(), id: Uuid::now_v7() };
        assert_eq!(Cursor::decode(&cursor.encode()), Ok(cursor));
        for bad in ["", "x", "12.notauuid", "abc.0190d6f0a0b07c3e8f3a1b2c3d4e5f60", ".", "99999999999999999999.x"] {
            assert_eq!(Cursor::decode(bad), Err(BadCursor), "{bad:?}");
        }
    }
}
