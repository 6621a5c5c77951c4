//! What the steps of dead-lettered messages are now, so `rara dlq` can tell a message that
//! still matters from one whose step moved on.

use chrono::{DateTime, Utc};
use rara_domain::state::StepStatus;
use uuid::Uuid;

use crate::{Error, Store};

/// A step as a dead-letter sees it: whether its lease is still the message's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DlqStep {
    pub id: Uuid,
    pub status: StepStatus,
    /// The token of the current lease; `None` unless the step is leased or running.
    pub lease_token: Option<Uuid>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl Store {
    /// The steps among `step_ids` (one statement for the whole page); unknown ids are absent.
    pub async fn dlq_steps(&self, step_ids: &[Uuid]) -> Result<Vec<DlqStep>, Error> {
        Ok(sqlx::query_file_as!(DlqStep, "sql/dlq_step.sql", step_ids).fetch_all(&self.pool).await?)
    }
}
