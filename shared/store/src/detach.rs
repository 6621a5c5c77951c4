//! Long steps (DESIGN.md "Long steps"): parking a remote attempt that outlives its invocation,
//! and finding the detached attempts a cancel must reach. Re-attaching is the claim's work
//! ([`claim`](crate::claim)).

use std::time::Duration;

use chrono::{DateTime, Utc};
use rara_domain::executor::Resume;
use uuid::Uuid;

use crate::fence::{columns, per_holder};
use crate::{Error, Holder, Store, millis, sql};

/// One attempt to park: its holder, where it runs and how far its events were recorded, and
/// when the holder attached (the start of the stretch the attempt row records).
#[derive(Debug, Clone, PartialEq)]
pub struct Park {
    pub holder: Holder,
    pub resume: Resume,
    pub attached_at: DateTime<Utc>,
}

/// An attempt running detached on a remote executor, as a cancel must reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetachedAttempt {
    pub step_id: Uuid,
    pub attempt: u32,
    pub fence: i64,
    pub endpoint: String,
}

/// A row of `sql/detached_attempts.sql` or `sql/detached_attempts_of_runs.sql`.
pub(crate) struct DetachedRow {
    pub step_id: Uuid,
    pub attempt: i32,
    pub fence: i64,
    pub remote_endpoint: String,
}

impl From<DetachedRow> for DetachedAttempt {
    fn from(r: DetachedRow) -> Self {
        DetachedAttempt {
            step_id: r.step_id,
            attempt: u32::try_from(r.attempt).unwrap_or(0),
            fence: r.fence,
            endpoint: r.remote_endpoint,
        }
    }
}

impl Store {
    /// Parks attempts in one fenced statement: each step goes back to `leased` under the same
    /// lease token, keeping its attempt and fence, due again (for re-attaching) after
    /// `interval`; its lease lasts `interval` plus `delivery` (the message's own bound). One
    /// result per item, in order; a holder that lost its lease gets `LeaseLost`.
    pub async fn park(
        &self,
        items: &[Park],
        interval: Duration,
        delivery: Duration,
    ) -> Result<Vec<Result<(), Error>>, Error> {
        let holders: Vec<&Holder> = items.iter().map(|p| &p.holder).collect();
        let held = columns(&holders);
        let endpoints: Vec<&str> = items.iter().map(|p| p.resume.endpoint.as_str()).collect();
        let sequences: Vec<i64> = items.iter().map(|p| i64::try_from(p.resume.sequence).unwrap_or(i64::MAX)).collect();
        let attached: Vec<DateTime<Utc>> = items.iter().map(|p| p.attached_at).collect();
        let landed: Vec<Uuid> = sqlx::query_scalar(sql::PARK.as_str())
            .bind(&held.step_ids)
            .bind(&held.workers)
            .bind(&held.fences)
            .bind(&endpoints)
            .bind(&sequences)
            .bind(&attached)
            .bind(millis(interval))
            .bind(millis(delivery))
            .fetch_all(&self.pool)
            .await?;
        Ok(per_holder(&holders, &landed))
    }

    /// The attempts of the run or step `id` that run detached (parked) on a remote executor.
    pub async fn detached_attempts(&self, id: Uuid) -> Result<Vec<DetachedAttempt>, Error> {
        let rows = sqlx::query_file_as!(DetachedRow, "sql/detached_attempts.sql", id).fetch_all(&self.pool).await?;
        Ok(rows.into_iter().map(DetachedAttempt::from).collect())
    }
}
