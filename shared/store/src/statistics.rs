//! Planner statistics of the hot tables, kept fresh while they grow from empty.
//!
//! Every statement runs as a prepared statement, and Postgres switches a prepared statement
//! to its *generic* plan after five executions; that plan is kept until the table's
//! statistics change (an `ANALYZE` invalidates it). A plan made while `steps` was empty or
//! tiny reads every leased or running step, or the whole table, to find the ten of a batch:
//! measured on a fresh database with autovacuum off, a steady 3,000 steps/s fell from 514
//! to 64 steps/s in two minutes. Autovacuum analyzes a table after 10 % of it changed, but
//! only once per `autovacuum_naptime` (a minute) and not at all where it is off, so the
//! scheduler also checks every second: a table whose changes since its last analyze
//! reach its size (at least [`MIN_CHANGES`]) is analyzed. The table doubles between two
//! such analyzes, so they stop mattering once autovacuum keeps up; each costs a sample of
//! at most 30,000 rows.

use crate::{Error, Store, sql};

/// The hot tables whose statistics decide the plans of the claim and outcome statements.
pub const TABLES: [&str; 3] = ["steps", "step_attempts", "workflow_runs"];

/// Changes a table must see before it is analyzed at all.
pub const MIN_CHANGES: i64 = 1000;

impl Store {
    /// Analyzes the hot tables that grew past their statistics (see the module docs) and
    /// returns their names. `ANALYZE (SKIP_LOCKED)`: a table autovacuum is busy with is left
    /// to it.
    pub async fn refresh_grown_statistics(&self) -> Result<Vec<String>, Error> {
        let grown: Vec<String> = sqlx::query_file_scalar!("sql/grown_tables.sql", MIN_CHANGES, &TABLES[..] as &[&str])
            .fetch_all(&self.pool)
            .await?;
        let mut analyzed = Vec::new();
        for (table, analyze) in TABLES.iter().zip(sql::ANALYZE.iter()).filter(|(t, _)| grown.iter().any(|g| g == *t)) {
            // A table skipped because autovacuum holds it is no news: Postgres says so with a
            // WARNING, which the client would log as one at every check while autovacuum runs.
            let mut tx = self.pool.begin().await?;
            sqlx::query("SET LOCAL client_min_messages = error").execute(&mut *tx).await?;
            sqlx::query(analyze).persistent(false).execute(&mut *tx).await?;
            tx.commit().await?;
            analyzed.push((*table).to_owned());
        }
        Ok(analyzed)
    }
}
