//! What the console's overview reads: attempts per bucket of time by outcome (the charts), per
//! operation (attempts, failures, duration percentiles), the commonest error codes with runs
//! they failed in, and the state now (runs running, waiting, failed; due steps and the oldest
//! one). Each statement reads through an index (migration `…000031_console_overview.sql`;
//! `tests/explain.rs` proves it) and takes its instants as parameters, so tests set the clock.
//! The console reads all four at once ([`Store::overview`]): one transaction, one snapshot, and
//! for the last hour no parallel workers (starting them cost more than reading the few thousand
//! attempts of an hour; journal `2026-12-07-console-overview-1m-steps.md`).

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::{Error, Store};

pub const OVERVIEW_CHART: &str = include_str!("../sql/overview_chart.sql");
pub const OVERVIEW_OPERATIONS: &str = include_str!("../sql/overview_operations.sql");
pub const OVERVIEW_ERRORS: &str = include_str!("../sql/overview_errors.sql");
pub const OVERVIEW_NOW: &str = include_str!("../sql/overview_now.sql");

/// Due steps are counted up to this many (the overview says "at least").
pub const DUE_COUNTED: i64 = 100_000;

/// The overview's statements as the catalogue (`sql.rs`) lists them: name,
/// text, parameter types.
pub const STATEMENTS: [(&str, &str, &[&str]); 4] = [
    ("overview_chart", OVERVIEW_CHART, &["timestamptz", "timestamptz", "int8"]),
    ("overview_operations", OVERVIEW_OPERATIONS, &["timestamptz", "timestamptz", "int8"]),
    ("overview_errors", OVERVIEW_ERRORS, &["timestamptz", "timestamptz", "int8"]),
    ("overview_now", OVERVIEW_NOW, &["timestamptz", "timestamptz", "int8"]),
];

/// The attempts that started in one bucket of a chart, by how they ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub struct Bucket {
    /// Its index from the window's start.
    pub bucket: i64,
    pub succeeded: i64,
    pub failed: i64,
    pub retried: i64,
}

/// One operation's attempts in a window.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct OperationStats {
    pub operation: String,
    pub attempts: i64,
    pub failures: i64,
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
}

/// One error code's attempts in a window, and runs it failed in (newest first, at most five).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ErrorStats {
    pub code: Option<String>,
    pub attempts: i64,
    pub last_seen: DateTime<Utc>,
    pub runs: Vec<Uuid>,
}

/// The state at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub struct Now {
    pub running: i64,
    /// Runs with a step waiting for a timer, a signal or an event.
    pub waiting: i64,
    /// Runs that failed since the window's start.
    pub failed: i64,
    /// Due steps not leased yet, counted up to [`DUE_COUNTED`].
    pub due: i64,
    pub oldest_due: Option<DateTime<Utc>>,
}

/// What the overview shows, read together ([`Store::overview`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub now: Now,
    pub chart: Vec<Bucket>,
    pub operations: Vec<OperationStats>,
    pub errors: Vec<ErrorStats>,
}

/// Set in the overview's transaction when its window is at most [`SERIAL_UP_TO_HOURS`]: no
/// parallel workers (see the module's doc).
pub const SERIAL: &str = "SET LOCAL max_parallel_workers_per_gather = 0";
/// The longest window read without parallel workers: an hour's attempts are read faster by one
/// process, a day's (24 times as many) faster with workers (journal
/// `2026-12-07-console-overview-1m-steps.md`).
pub const SERIAL_UP_TO_HOURS: i64 = 1;

/// A window of time: `[from, to)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

impl Store {
    /// The attempts started in `window` by bucket of `bucket_seconds` (buckets without any
    /// attempt are absent).
    pub async fn overview_chart(&self, window: Window, bucket_seconds: i64) -> Result<Vec<Bucket>, Error> {
        let query = sqlx::query_as(OVERVIEW_CHART).bind(window.from).bind(window.to).bind(bucket_seconds.max(1));
        Ok(query.fetch_all(&self.pool).await?)
    }

    /// The `limit` operations with the most attempts started in `window`.
    pub async fn overview_operations(&self, window: Window, limit: i64) -> Result<Vec<OperationStats>, Error> {
        let query = sqlx::query_as(OVERVIEW_OPERATIONS).bind(window.from).bind(window.to).bind(limit);
        Ok(query.fetch_all(&self.pool).await?)
    }

    /// The `limit` error codes most attempts started in `window` ended with.
    pub async fn overview_errors(&self, window: Window, limit: i64) -> Result<Vec<ErrorStats>, Error> {
        let query = sqlx::query_as(OVERVIEW_ERRORS).bind(window.from).bind(window.to).bind(limit);
        Ok(query.fetch_all(&self.pool).await?)
    }

    /// The state at `hour.to` (failures over `hour`), and over `window` the chart in buckets of
    /// `bucket_seconds` and the `limit` busiest operations and commonest error codes: one
    /// transaction (one snapshot), parallel workers off ([`SERIAL`]) for a window of at most
    /// [`SERIAL_UP_TO_HOURS`].
    pub async fn overview(
        &self,
        hour: Window,
        window: Window,
        bucket_seconds: i64,
        limit: i64,
    ) -> Result<Reading, Error> {
        let mut tx = self.pool.begin().await?;
        if window.to - window.from <= chrono::Duration::hours(SERIAL_UP_TO_HOURS) {
            sqlx::query(SERIAL).execute(&mut *tx).await?;
        }
        let now =
            sqlx::query_as(OVERVIEW_NOW).bind(hour.to).bind(hour.from).bind(DUE_COUNTED).fetch_one(&mut *tx).await?;
        let chart = sqlx::query_as(OVERVIEW_CHART)
            .bind(window.from)
            .bind(window.to)
            .bind(bucket_seconds.max(1))
            .fetch_all(&mut *tx)
            .await?;
        let operations = sqlx::query_as(OVERVIEW_OPERATIONS)
            .bind(window.from)
            .bind(window.to)
            .bind(limit)
            .fetch_all(&mut *tx)
            .await?;
        let errors =
            sqlx::query_as(OVERVIEW_ERRORS).bind(window.from).bind(window.to).bind(limit).fetch_all(&mut *tx).await?;
        tx.commit().await?;
        Ok(Reading { now, chart, operations, errors })
    }

    /// The runs running and waiting at `window.to`, failed in `window`, and the due steps.
    pub async fn overview_now(&self, window: Window) -> Result<Now, Error> {
        let query = sqlx::query_as(OVERVIEW_NOW).bind(window.to).bind(window.from).bind(DUE_COUNTED);
        Ok(query.fetch_one(&self.pool).await?)
    }
}
