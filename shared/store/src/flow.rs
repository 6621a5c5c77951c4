//! Flow control's operator side (DESIGN.md "Flow control"): limits per key or group of keys,
//! and pauses of runs, keys and operations. The lease statement (`sql/lease_due.sql`, see
//! [`lease`](crate::lease)) enforces them; this module writes and reads them.

use std::time::Duration;

use chrono::{DateTime, Utc};
use rara_domain::flow::Rate;
use uuid::Uuid;

use crate::{DUE_CHANNEL, Error, Store, millis};

/// What a pause applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PauseTarget {
    Run(Uuid),
    /// A key, or a group of keys (`tenant-*`).
    Key(String),
    Operation(String),
}

impl PauseTarget {
    fn kind(&self) -> &'static str {
        match self {
            PauseTarget::Run(_) => "run",
            PauseTarget::Key(_) => "key",
            PauseTarget::Operation(_) => "operation",
        }
    }

    fn target(&self) -> String {
        match self {
            PauseTarget::Run(id) => id.to_string(),
            PauseTarget::Key(t) | PauseTarget::Operation(t) => t.clone(),
        }
    }
}

/// A key or a group of keys (`tenant-*`) as `rara limits list` shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct KeyState {
    /// The key, or the group (a prefix ending in `*`).
    pub name: String,
    /// The operator's limit on what it holds at once, if any.
    pub limit: Option<u32>,
    /// The operator's rate, spelt as it was set (`50/s`), if any.
    pub rate: Option<String>,
    /// Steps leased or running now (a group: over its keys).
    pub held: u64,
    /// Steps due (dependencies met), waiting for room, time or a resume.
    pub queued: u64,
    /// A pause covers it.
    pub paused: bool,
}

/// One pause.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Pause {
    pub kind: String,
    pub target: String,
    pub paused_at: DateTime<Utc>,
}

/// An instant a key (or group) ran more attempts than its limit ([`Store::limit_overruns`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overrun {
    pub name: String,
    pub at: DateTime<Utc>,
    pub running: i64,
    pub limit: i32,
}

impl Store {
    /// Sets the operator's limit on a key or group (`tenant-*`): at most `max_held` held at
    /// once and at most `rate`; a part given as `None` keeps its current value.
    pub async fn set_limit(&self, target: &str, max_held: Option<u32>, rate: Option<Rate>) -> Result<(), Error> {
        let int = |n: u32| n.min(i32::MAX as u32) as i32;
        sqlx::query_file!(
            "sql/flow_limit_set.sql",
            target,
            max_held.map(int),
            rate.map(|r| int(r.count)),
            rate.map(|r| millis(r.period)),
            rate.map(|r| int(r.burst())),
            DUE_CHANNEL
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(())
    }

    /// Removes the operator's limit on a key or group; `false` if there was none.
    pub async fn unset_limit(&self, target: &str) -> Result<bool, Error> {
        Ok(sqlx::query_file!("sql/flow_limit_unset.sql", target, DUE_CHANNEL)
            .fetch_optional(&self.pool)
            .await?
            .is_some())
    }

    /// Every key and group with a limit, held or due steps, or a pause, by name.
    pub async fn limits(&self) -> Result<Vec<KeyState>, Error> {
        let rows = sqlx::query_file!("sql/flow_limits_list.sql").fetch_all(&self.pool).await?;
        Ok(rows
            .into_iter()
            .map(|r| KeyState {
                name: r.name,
                limit: r.max_held.map(|n| n.max(0) as u32),
                rate: r.rate_count.zip(r.rate_period_ms).map(|(count, ms)| {
                    Rate { count: count.max(0) as u32, period: Duration::from_millis(ms.max(0) as u64) }.to_string()
                }),
                held: r.held.max(0) as u64,
                queued: r.queued.max(0) as u64,
                paused: r.paused,
            })
            .collect())
    }

    /// Pauses a run, key (or group `tenant-*`) or operation; `false` if it was paused already.
    /// A run must exist.
    pub async fn pause(&self, what: &PauseTarget) -> Result<bool, Error> {
        if let PauseTarget::Run(id) = what
            && !self.run_exists(*id).await?
        {
            return Err(Error::RunNotFound(*id));
        }
        Ok(sqlx::query_file_scalar!("sql/flow_pause.sql", what.kind(), what.target())
            .fetch_optional(&self.pool)
            .await?
            .is_some())
    }

    /// Lifts a pause; `false` if there was none. Listening schedulers wake at once.
    pub async fn resume(&self, what: &PauseTarget) -> Result<bool, Error> {
        Ok(sqlx::query_file!("sql/flow_resume.sql", what.kind(), what.target(), DUE_CHANNEL)
            .fetch_optional(&self.pool)
            .await?
            .is_some())
    }

    /// Every pause, oldest first.
    pub async fn pauses(&self) -> Result<Vec<Pause>, Error> {
        Ok(sqlx::query_file_as!(Pause, "sql/flow_pauses.sql").fetch_all(&self.pool).await?)
    }

    /// The limit invariant, checked over the attempt history (`sql/flow_overruns.sql`): every
    /// instant an attempt started when its key, or its key's group, ran more attempts than its
    /// limit. Empty when no key ever exceeded its limit. A running attempt is held, so a lease
    /// over a limit shows here as soon as its message is claimed.
    pub async fn limit_overruns(&self) -> Result<Vec<Overrun>, Error> {
        Ok(sqlx::query_file_as!(Overrun, "sql/flow_overruns.sql").fetch_all(&self.pool).await?)
    }

    /// Deletes up to `limit` rows of `flow_keys` that no lease needs any more
    /// (`sql/prune_flow_keys.sql`): keys without an operator limit, due steps or held steps.
    /// Authors choose keys; the scheduler's maintenance calls this so the table does not keep a
    /// row for every key ever leased. Returns how many rows were deleted.
    pub async fn prune_flow_keys(&self, limit: u32) -> Result<u64, Error> {
        let deleted: i64 =
            sqlx::query_scalar(crate::sql::PRUNE_FLOW_KEYS).bind(i64::from(limit)).fetch_one(&self.pool).await?;
        Ok(deleted.max(0) as u64)
    }
}
