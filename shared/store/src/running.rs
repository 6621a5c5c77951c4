//! Fenced writes while a step runs: heartbeats, progress, artifacts and the version a remote
//! executor runs the attempt at. Each matches the
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

    /// Records the capability version the remote executor runs the current attempt at.
    pub async fn attempt_version(&self, holder: &Holder, version: &str) -> Result<(), Error> {
        let written = sqlx::query(sql::ATTEMPT_VERSION.as_str())
            .bind(holder.step_id)
            .bind(&holder.worker)
            .bind(holder.fence)
            .bind(version)
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

impl Store {
    /// Why `holder` no longer holds its step, in words for the remote executor's log and
    /// the attempt's history: cancelled (by an operator, with the reason; the run or the
    /// step), taken over by a newer fence, handed back by the reaper, or already finished.
    pub async fn why_lost(&self, holder: &Holder) -> Result<String, Error> {
        let Some(row) = sqlx::query_file!("sql/lost_reason.sql", holder.step_id).fetch_optional(&self.pool).await?
        else {
            return Ok("the step no longer exists".into());
        };
        let error: Option<rara_domain::StepError> = row.error.and_then(|e| serde_json::from_value(e).ok());
        Ok(match row.status.as_str() {
            "cancelled" => {
                let what = match error.as_ref().and_then(|e| e.details.get("cancelled")).and_then(|v| v.as_str()) {
                    Some("run") => "the run was cancelled",
                    _ => "the step was cancelled",
                };
                match error {
                    Some(e) if !e.message.is_empty() => format!("{what}: {}", e.message),
                    _ => what.to_owned(),
                }
            }
            "running" if row.fence.is_some_and(|f| f > holder.fence) => format!(
                "another executor ({}) took the step over under a newer fence",
                row.leased_by.as_deref().unwrap_or("unknown")
            ),
            "pending" | "leased" => "the lease expired and the step was handed back for another attempt".into(),
            status => format!("the step is {status}: this attempt no longer holds it"),
        })
    }
}
