//! Planner statistics of the hot tables, kept fresh while they grow from empty.
//!
//! Every statement runs as a prepared statement, and Postgres switches a prepared statement
//! to its *generic* plan after five executions; that plan is kept until the table's
//! statistics change (an `ANALYZE` invalidates it). A plan made while `steps` was empty or
//! tiny reads every leased or running step, or the whole table, to find the ten of a batch, and
//! on a fresh database with autovacuum off a steady load slows within minutes (journal:
//! `docs/benchmarks/journal/2026-12-02-soak.md`). Autovacuum analyzes a table after 10 % of it changed, but
//! only once per `autovacuum_naptime` (a minute) and not at all where it is off, so the
//! scheduler also checks every second: a table that grew to twice the rows its statistics saw
//! (by at least [`MIN_GROWTH`] rows) is analyzed. Growth, not change: a table's updates and
//! deletes leave the plans right (every statement reaches its rows through an index), and
//! autovacuum follows a table that churns at its size. Counting changes (each step is leased
//! and finished: two) analyzed `steps` again after every half of its size changed, a cost
//! paid again and again at a steady size (journal:
//! `docs/benchmarks/journal/2026-12-05-statistics-by-growth.md`). The table doubles
//! between two such analyzes, so they are rare once it is large; each costs a sample of at most
//! 30,000 rows.

use crate::{Error, Store, sql};

/// The hot tables whose statistics decide the plans of the claim and outcome statements.
pub use crate::sql::HOT_TABLES as TABLES;

/// Rows a table must gain before it is analyzed at all.
pub const MIN_GROWTH: i64 = 1000;

impl Store {
    /// Analyzes the hot tables that grew past their statistics (see the module docs) and
    /// returns their names. `ANALYZE (SKIP_LOCKED)` (through `rara_analyze`): a table
    /// autovacuum is busy with is left to it.
    pub async fn refresh_grown_statistics(&self) -> Result<Vec<String>, Error> {
        let grown: Vec<String> = sqlx::query_file_scalar!("sql/grown_tables.sql", MIN_GROWTH, &TABLES[..] as &[&str])
            .fetch_all(&self.pool)
            .await?;
        let mut analyzed = Vec::new();
        for (table, analyze) in TABLES.iter().zip(sql::ANALYZE.iter()).filter(|(t, _)| grown.iter().any(|g| g == *t)) {
            // `rara_analyze` runs as the schema's owner (the scheduler's role may not analyze)
            // and keeps its WARNING about a table autovacuum holds to itself: that is no news,
            // and the client would log one at every check while autovacuum runs.
            sqlx::query(analyze).persistent(false).execute(&self.pool).await?;
            analyzed.push((*table).to_owned());
        }
        Ok(analyzed)
    }
}
