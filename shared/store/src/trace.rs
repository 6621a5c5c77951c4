//! The trace of a run (DESIGN.md "Tracing"): the context stored on the run at submission,
//! and what the scheduler needs to emit each leased attempt's span.

use uuid::Uuid;

use crate::{Error, Store};

/// A leased step's place in its run's trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseTrace {
    pub step_id: Uuid,
    pub run_id: Uuid,
    pub operation: String,
    /// The attempt the claim will run.
    pub attempt: i32,
    /// The run's W3C `traceparent` (`None` for a run from before tracing).
    pub trace_context: Option<String>,
}

impl Store {
    /// The traces of the leased steps `step_ids`, in one statement.
    pub async fn lease_traces(&self, step_ids: &[Uuid]) -> Result<Vec<LeaseTrace>, Error> {
        Ok(sqlx::query_file_as!(LeaseTrace, "sql/lease_traces.sql", step_ids).fetch_all(&self.pool).await?)
    }

    /// The trace context of a run: `Ok(None)` for a run without one, [`Error::RunNotFound`] when
    /// there is no such run.
    pub async fn run_trace(&self, run_id: Uuid) -> Result<Option<String>, Error> {
        sqlx::query_file_scalar!("sql/run_trace.sql", run_id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or(Error::RunNotFound(run_id))
    }
}
