//! The scheduler's round of schedules: one bounded statement locks the due schedules
//! (`schedule_due.sql`, `FOR UPDATE SKIP LOCKED`), then, in that transaction, each one's slots
//! are decided and its runs submitted, each slot in a savepoint of its own (a slot that fails is
//! counted and the round goes on), and each schedule advanced. Another scheduler skips what this
//! one holds, and after the commit finds it advanced; the slot's idempotency key makes one run
//! of a slot even so.

use chrono::{DateTime, Utc};
use rara_domain::workflow::Plan;
use sqlx::{Postgres, Transaction};
use uuid::Uuid;

use super::{ScheduleSpec, spec_of_row};
use crate::definitions::Definition;
use crate::submit::{Origin, Submitted, submit_in};
use crate::{Error, Store};

/// A due schedule, as the round reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct DueSchedule {
    pub id: Uuid,
    pub name: String,
    pub spec: ScheduleSpec,
    pub next_slot_at: DateTime<Utc>,
    pub buffered_slot_at: Option<DateTime<Utc>>,
    pub last_run_id: Option<Uuid>,
    /// Whether its latest run is still going.
    pub last_running: bool,
}

/// What a round decided for one schedule.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Advance {
    /// The first slot not decided, and when it fires.
    pub next_slot_at: DateTime<Utc>,
    pub next_fire_at: DateTime<Utc>,
    pub buffered_slot_at: Option<DateTime<Utc>>,
    /// The latest run made, with its slot.
    pub last_run: Option<(Uuid, DateTime<Utc>)>,
    pub fired: u64,
    pub skipped: u64,
    pub missed: u64,
    pub failed: u64,
    /// Why the last failed slot failed.
    pub error: Option<String>,
}

/// A round in progress: the due schedules, locked until [`commit`](Self::commit).
pub struct ScheduleRound {
    tx: Transaction<'static, Postgres>,
    /// The database's clock when the round began.
    pub now: DateTime<Utc>,
    pub due: Vec<DueSchedule>,
}

impl std::fmt::Debug for ScheduleRound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScheduleRound").field("now", &self.now).field("due", &self.due.len()).finish_non_exhaustive()
    }
}

impl Store {
    /// Begins a round over at most `limit` due schedules.
    pub async fn begin_schedule_round(&self, limit: u32) -> Result<ScheduleRound, Error> {
        let mut tx = self.pool.begin().await?;
        let rows = sqlx::query_file!("sql/schedule_due.sql", i64::from(limit)).fetch_all(&mut *tx).await?;
        let now = rows.first().map(|r| r.now).unwrap_or_else(Utc::now);
        let due = rows
            .into_iter()
            .map(|r| DueSchedule {
                id: r.id,
                name: r.name,
                next_slot_at: r.next_slot_at,
                buffered_slot_at: r.buffered_slot_at,
                last_run_id: r.last_run_id,
                last_running: r.last_running,
                spec: spec_of_row!(r),
            })
            .collect();
        Ok(ScheduleRound { tx, now, due })
    }
}

impl ScheduleRound {
    /// The registered definition a slot runs (see [`Store::definition`]).
    pub async fn definition(&mut self, name: &str, version: Option<i32>) -> Result<Definition, Error> {
        let row = sqlx::query_file!("sql/definition.sql", name, version)
            .fetch_optional(&mut *self.tx)
            .await?
            .ok_or_else(|| Error::DefinitionNotFound { name: name.to_owned(), version })?;
        Ok(Definition { name: row.name, version: row.version, definition: row.definition, created_at: row.created_at })
    }

    /// Submits a slot's run in a savepoint: an error leaves the round's transaction usable.
    pub async fn submit(&mut self, plan: &Plan, origin: Origin) -> Result<Submitted, Error> {
        let mut savepoint = sqlx::Acquire::begin(&mut *self.tx).await?;
        let submitted = submit_in(&mut savepoint, plan, None, origin).await;
        match submitted {
            Ok(submitted) => {
                savepoint.commit().await?;
                Ok(submitted)
            }
            Err(e) => {
                savepoint.rollback().await?;
                Err(e)
            }
        }
    }

    /// Cancels the run `run_id` (`cancel_previous`); how many steps it cancelled.
    pub async fn cancel_run(&mut self, run_id: Uuid, reason: &str) -> Result<u64, Error> {
        crate::outcome::cancel_run_in(&mut self.tx, run_id, reason).await
    }

    /// Records what the round decided for the schedule `id`.
    pub async fn advance(&mut self, id: Uuid, advance: &Advance) -> Result<(), Error> {
        sqlx::query_file!(
            "sql/schedule_advance.sql",
            id,
            advance.next_slot_at,
            advance.next_fire_at,
            advance.buffered_slot_at,
            advance.last_run.map(|l| l.0),
            advance.last_run.map(|l| l.1),
            advance.fired as i64,
            advance.skipped as i64,
            advance.missed as i64,
            advance.failed as i64,
            advance.error.as_deref()
        )
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    pub async fn commit(self) -> Result<(), Error> {
        Ok(self.tx.commit().await?)
    }
}
