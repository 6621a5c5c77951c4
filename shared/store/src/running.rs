//! Fenced writes while a step runs: heartbeats, progress and artifacts. Each matches the
//! step only while `worker` holds it under `fence` and it is `running`; otherwise the answer
//! is [`Error::LeaseLost`] and the execution must stop.

use std::time::Duration;

use chrono::{DateTime, Utc};
use rara_domain::executor::Artifact;

use crate::{Error, Holder, Store, millis};

const HEARTBEAT: &str = "
UPDATE steps SET lease_expires_at = now() + $4 * interval '1 millisecond', updated_at = now()
WHERE id = $1 AND leased_by = $2 AND fence = $3 AND status = 'running'
RETURNING lease_expires_at";

const PROGRESS: &str = "
UPDATE steps SET progress = jsonb_build_object('fraction', $4::float8, 'message', $5::text), updated_at = now()
WHERE id = $1 AND leased_by = $2 AND fence = $3 AND status = 'running'";

const ARTIFACT: &str = "
INSERT INTO artifacts (step_id, attempt, fence, name, uri, media_type, size_bytes, digest)
SELECT id, attempt, fence, $4, $5, $6, $7, $8 FROM steps
WHERE id = $1 AND leased_by = $2 AND fence = $3 AND status = 'running'";

impl Holder {
    fn lost(&self) -> Error {
        Error::LeaseLost { step_id: self.step_id, fence: self.fence }
    }
}

impl Store {
    /// Extends the lease by `lease` from now. Returns the new expiry.
    pub async fn heartbeat(&self, holder: &Holder, lease: Duration) -> Result<DateTime<Utc>, Error> {
        let expires: Option<DateTime<Utc>> = sqlx::query_scalar(HEARTBEAT)
            .bind(holder.step_id)
            .bind(&holder.worker)
            .bind(holder.fence)
            .bind(millis(lease))
            .fetch_optional(&self.pool)
            .await?;
        expires.ok_or_else(|| holder.lost())
    }

    /// Records the step's latest progress (`fraction` clamped to `0..=1`).
    pub async fn progress(&self, holder: &Holder, fraction: f64, message: &str) -> Result<(), Error> {
        let fraction = if fraction.is_finite() { fraction.clamp(0.0, 1.0) } else { 0.0 };
        let rows = sqlx::query(PROGRESS)
            .bind(holder.step_id)
            .bind(&holder.worker)
            .bind(holder.fence)
            .bind(fraction)
            .bind(message)
            .execute(&self.pool)
            .await?
            .rows_affected();
        if rows == 0 { Err(holder.lost()) } else { Ok(()) }
    }

    /// Records an artifact of the current attempt.
    pub async fn artifact(&self, holder: &Holder, artifact: &Artifact) -> Result<(), Error> {
        let rows = sqlx::query(ARTIFACT)
            .bind(holder.step_id)
            .bind(&holder.worker)
            .bind(holder.fence)
            .bind(&artifact.name)
            .bind(&artifact.uri)
            .bind(&artifact.media_type)
            .bind(artifact.size_bytes)
            .bind(&artifact.digest)
            .execute(&self.pool)
            .await?
            .rows_affected();
        if rows == 0 { Err(holder.lost()) } else { Ok(()) }
    }
}
