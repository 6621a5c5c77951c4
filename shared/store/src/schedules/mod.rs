//! Schedules in Postgres: created, listed, paused, resumed, deleted, and fired. The scheduler's
//! round ([`ScheduleRound`], `round.rs`) locks the due schedules in one bounded statement and
//! decides their slots in that transaction; a slot's run carries the key
//! `rara_domain::schedule::slot_key`, so it is one run however many schedulers, triggers or
//! backfills make it. The calendar and the overlap policy are the domain's
//! (`rara_domain::schedule`); this module stores what they decide.
//!
//! # Layout
//!
//! - this file: a schedule as stored and shown, and an operator's changes.
//! - `round.rs`: the scheduler's round over the due schedules.

mod round;

use chrono::{DateTime, Utc};
use rara_domain::state::RunStatus;
use serde::Serialize;
use uuid::Uuid;

pub use round::{Advance, DueSchedule, ScheduleRound};

use crate::{Error, Store};

/// What a schedule runs and when: its workflow, calendar, inputs and policies, as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScheduleSpec {
    pub workflow: String,
    /// `None`: the newest version when a slot fires.
    pub workflow_version: Option<i32>,
    pub cron: Option<String>,
    pub every_ms: Option<i64>,
    pub timezone: String,
    pub inputs: serde_json::Value,
    pub overlap: String,
    pub catchup_window_ms: i64,
    pub jitter_ms: i64,
}

/// A [`ScheduleSpec`] from a row that has its columns.
macro_rules! spec_of_row {
    ($r:expr) => {
        $crate::schedules::ScheduleSpec {
            workflow: $r.workflow,
            workflow_version: $r.workflow_version,
            cron: $r.cron,
            every_ms: $r.every_ms,
            timezone: $r.timezone,
            inputs: $r.inputs,
            overlap: $r.overlap,
            catchup_window_ms: $r.catchup_window_ms,
            jitter_ms: $r.jitter_ms,
        }
    };
}
use spec_of_row;

/// A schedule to create; its first slot is computed by the caller.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSchedule {
    pub id: Uuid,
    pub name: String,
    pub spec: ScheduleSpec,
    pub next_slot_at: DateTime<Utc>,
    pub next_fire_at: DateTime<Utc>,
}

/// A schedule as `rara schedule list` and the API show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScheduleView {
    pub id: Uuid,
    pub name: String,
    #[serde(flatten)]
    pub spec: ScheduleSpec,
    pub paused: bool,
    /// The next slot, and when it fires (with its jitter).
    pub next_slot_at: DateTime<Utc>,
    pub next_fire_at: DateTime<Utc>,
    pub buffered_slot_at: Option<DateTime<Utc>>,
    pub last_run_id: Option<Uuid>,
    pub last_run_status: Option<RunStatus>,
    pub last_slot_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub slots_fired: i64,
    pub slots_skipped: i64,
    pub slots_missed: i64,
    pub slots_failed: i64,
    pub created_at: DateTime<Utc>,
}

impl ScheduleView {
    /// The workflow as `NAME@VERSION` or `NAME@latest`.
    pub fn workflow_ref(&self) -> String {
        match self.spec.workflow_version {
            Some(v) => format!("{}@{v}", self.spec.workflow),
            None => format!("{}@latest", self.spec.workflow),
        }
    }
}

impl Store {
    /// Creates a schedule; [`Error::ScheduleExists`] when its name is taken.
    pub async fn create_schedule(&self, new: &NewSchedule) -> Result<(), Error> {
        let created = sqlx::query_file_scalar!(
            "sql/schedule_create.sql",
            new.id,
            &new.name,
            &new.spec.workflow,
            new.spec.workflow_version,
            new.spec.cron.as_deref(),
            new.spec.every_ms,
            &new.spec.timezone,
            &new.spec.inputs,
            &new.spec.overlap,
            new.spec.catchup_window_ms,
            new.spec.jitter_ms,
            new.next_slot_at,
            new.next_fire_at
        )
        .fetch_optional(&self.pool)
        .await?;
        created.map(|_| ()).ok_or_else(|| Error::ScheduleExists(new.name.clone()))
    }

    /// The schedules by name, at most `limit`.
    pub async fn schedules(&self, limit: u32) -> Result<Vec<ScheduleView>, Error> {
        self.schedules_named(None, limit).await
    }

    /// The schedule `name`, or [`Error::ScheduleNotFound`].
    pub async fn schedule(&self, name: &str) -> Result<ScheduleView, Error> {
        let mut found = self.schedules_named(Some(name), 1).await?;
        found.pop().ok_or_else(|| Error::ScheduleNotFound(name.to_owned()))
    }

    async fn schedules_named(&self, name: Option<&str>, limit: u32) -> Result<Vec<ScheduleView>, Error> {
        let rows = sqlx::query_file!("sql/schedules_list.sql", i64::from(limit), name).fetch_all(&self.pool).await?;
        Ok(rows
            .into_iter()
            .map(|r| ScheduleView {
                id: r.id,
                name: r.name,
                paused: r.paused,
                next_slot_at: r.next_slot_at,
                next_fire_at: r.next_fire_at,
                buffered_slot_at: r.buffered_slot_at,
                last_run_id: r.last_run_id,
                last_run_status: r.last_run_status,
                last_slot_at: r.last_slot_at,
                last_error: r.last_error,
                slots_fired: r.slots_fired,
                slots_skipped: r.slots_skipped,
                slots_missed: r.slots_missed,
                slots_failed: r.slots_failed,
                created_at: r.created_at,
                spec: spec_of_row!(r),
            })
            .collect())
    }

    /// Pauses (`true`) or resumes the schedule `name`.
    pub async fn set_schedule_paused(&self, name: &str, paused: bool) -> Result<(), Error> {
        let found = sqlx::query_file_scalar!("sql/schedule_pause.sql", name, paused).fetch_optional(&self.pool).await?;
        found.map(|_| ()).ok_or_else(|| Error::ScheduleNotFound(name.to_owned()))
    }

    /// Deletes the schedule `name`; its runs stay.
    pub async fn delete_schedule(&self, name: &str) -> Result<(), Error> {
        let found = sqlx::query_file_scalar!("sql/schedule_delete.sql", name).fetch_optional(&self.pool).await?;
        found.map(|_| ()).ok_or_else(|| Error::ScheduleNotFound(name.to_owned()))
    }

    /// Counts `runs` new runs of the schedule `id` made outside its calendar; `latest` (a run and
    /// its slot) becomes the run its overlap policy looks at.
    pub async fn schedule_fired(
        &self,
        id: Uuid,
        runs: u64,
        latest: Option<(Uuid, DateTime<Utc>)>,
    ) -> Result<(), Error> {
        sqlx::query_file!(
            "sql/schedule_fired.sql",
            id,
            runs as i64,
            latest.map(|l| l.0),
            latest.map(|l| l.1),
            latest.is_some()
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
