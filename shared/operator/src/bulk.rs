//! The set-based bulk actions over the runs a filter matches (`POST /api/bulk/retry`,
//! `POST /api/bulk/cancel`, the console's bulk form): each counts what it matches, and unless
//! it is a dry run acts on it one statement per batch, never one statement per step or run.
//!
//! A request acts on at most [`MAX_STEPS`] steps (retry) or [`MAX_RUNS`] runs (cancel); one
//! that matches more is refused whole with [`Error::TooMany`], before anything changes: a
//! narrower filter (`created_before`, `created_after`, `name`) splits it. Each batch commits on
//! its own, so a request that fails part way leaves the batches before it done (a second request
//! finds only what is left).

use rara_store::Store;
use rara_store::browse::RunFilter;

use rara_remote::Security;

use crate::cancel::{Told, tell_with};

/// Steps one retry statement takes: each statement locks the rows it changes until it commits.
pub const RETRY_BATCH: usize = 1_000;
/// Runs one cancel statement takes (every unfinished step of each).
pub const CANCEL_BATCH: usize = 100;
/// The most steps one bulk retry acts on.
pub const MAX_STEPS: usize = 10_000;
/// The most runs one bulk cancel acts on.
pub const MAX_RUNS: usize = 10_000;

/// What a bulk action did.
#[derive(Debug, Default)]
pub struct Done {
    /// Steps (retry) or runs (cancel) the filter matched.
    pub matched: u64,
    /// Steps changed (0 for a dry run).
    pub changed: u64,
    /// A cancel's detached attempts, each with whether its executor was told.
    pub told: Told,
}

/// A bulk action refused, or the store's failure.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The filter matches more than one request acts on; nothing changed.
    #[error("the filter matches {matched} {what}, more than the {limit} a bulk {action} takes; narrow the filter")]
    TooMany { action: &'static str, what: &'static str, matched: usize, limit: usize },
    #[error(transparent)]
    Store(#[from] rara_store::Error),
}

/// Retries the failed and cancelled steps of the runs `filter` matches (counts them only when
/// `dry_run`), [`RETRY_BATCH`] steps per statement.
pub async fn retry(store: &Store, filter: &RunFilter, dry_run: bool) -> Result<Done, Error> {
    let steps = store.retryable_steps(filter).await?;
    let mut done = Done { matched: steps.len() as u64, ..Done::default() };
    if dry_run {
        return Ok(done);
    }
    within("retry", "steps", steps.len(), MAX_STEPS)?;
    for batch in steps.chunks(RETRY_BATCH) {
        done.changed += store.retry_steps(batch).await?;
    }
    Ok(done)
}

/// Cancels every unfinished run `filter` matches with `reason` (counts them only when
/// `dry_run`), [`CANCEL_BATCH`] runs per statement; the detached attempts of each batch are
/// told after it, concurrently, without a token (see [`cancel_with`]).
pub async fn cancel(store: &Store, filter: &RunFilter, reason: &str, dry_run: bool) -> Result<Done, Error> {
    cancel_with(&Security::default(), store, filter, reason, dry_run).await
}

/// [`cancel`], telling detached attempts with the TLS settings, token and attempt secrets of
/// `security` ([`tell_with`]).
pub async fn cancel_with(
    security: &Security,
    store: &Store,
    filter: &RunFilter,
    reason: &str,
    dry_run: bool,
) -> Result<Done, Error> {
    let runs = store.running_runs(filter).await?;
    let mut done = Done { matched: runs.len() as u64, ..Done::default() };
    if dry_run {
        return Ok(done);
    }
    within("cancel", "runs", runs.len(), MAX_RUNS)?;
    let why = format!("the run was cancelled: {reason}");
    for batch in runs.chunks(CANCEL_BATCH) {
        // Read before the cancel: once cancelled, a step no longer says where it runs.
        let detached = store.detached_attempts_of_runs(batch).await?;
        done.changed += store.cancel_runs(batch, reason).await?;
        done.told.extend(tell_with(security, detached, &why).await);
    }
    Ok(done)
}

fn within(action: &'static str, what: &'static str, matched: usize, limit: usize) -> Result<(), Error> {
    if matched > limit {
        return Err(Error::TooMany { action, what, matched, limit });
    }
    Ok(())
}
