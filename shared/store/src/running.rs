//! Fenced writes while a step runs: heartbeats, progress and artifacts. Each matches the
//! step only while the [`Holder`] holds it ([`fence`](crate::fence)); otherwise the answer
//! is [`Error::LeaseLost`] and the execution must stop.

use std::time::Duration;

use chrono::{DateTime, Utc};
use rara_domain::executor::Artifact;

use crate::fence::{expect_changed, expect_row};
use crate::{Error, Holder, Store, millis, sql};

impl Store {
    /// Extends the lease by `lease` from now. Returns the new expiry.
    pub async fn heartbeat(&self, holder: &Holder, lease: Duration) -> Result<DateTime<Utc>, Error> {
        let expires: Option<Option<DateTime<Utc>>> = sqlx::query_scalar(sql::HEARTBEAT.as_str())
            .bind(holder.step_id)
            .bind(&holder.worker)
            .bind(holder.fence)
            .bind(millis(lease))
            .fetch_optional(&self.pool)
            .await?;
        expect_row(holder, expires.flatten())
    }

    /// Records the step's latest progress (`fraction` clamped to `0..=1`).
    pub async fn progress(&self, holder: &Holder, fraction: f64, message: &str) -> Result<(), Error> {
        let fraction = if fraction.is_finite() { fraction.clamp(0.0, 1.0) } else { 0.0 };
        let written = sqlx::query(sql::PROGRESS.as_str())
            .bind(holder.step_id)
            .bind(&holder.worker)
            .bind(holder.fence)
            .bind(fraction)
            .bind(message)
            .execute(&self.pool)
            .await?;
        expect_changed(holder, written.rows_affected())
    }

    /// Records an artifact of the current attempt.
    pub async fn artifact(&self, holder: &Holder, artifact: &Artifact) -> Result<(), Error> {
        let written = sqlx::query(sql::ARTIFACT.as_str())
            .bind(holder.step_id)
            .bind(&holder.worker)
            .bind(holder.fence)
            .bind(&artifact.name)
            .bind(&artifact.uri)
            .bind(&artifact.media_type)
            .bind(artifact.size_bytes)
            .bind(&artifact.digest)
            .execute(&self.pool)
            .await?;
        expect_changed(holder, written.rows_affected())
    }
}
