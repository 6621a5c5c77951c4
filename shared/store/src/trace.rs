//! The trace of a run (DESIGN.md "Tracing"): the context stored on the run at submission (the
//! lease returns it with each leased step, [`crate::lease::Leased`]).

use uuid::Uuid;

use crate::{Error, Store};

impl Store {
    /// The trace context of a run: `Ok(None)` for a run without one, [`Error::RunNotFound`] when
    /// there is no such run.
    pub async fn run_trace(&self, run_id: Uuid) -> Result<Option<String>, Error> {
        sqlx::query_file_scalar!("sql/run_trace.sql", run_id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or(Error::RunNotFound(run_id))
    }
}
