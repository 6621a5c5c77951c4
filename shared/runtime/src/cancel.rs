//! An operator's cancel of a run (every unfinished step) or of one step, as the CLI (and any
//! other front end) performs it: the store's cancel, then every attempt that runs detached on
//! a remote executor is told at once (DESIGN.md "Long steps"). Attached attempts hear it from
//! their holder: the cancel's `NOTIFY` on [`rara_store::listen::CANCEL_CHANNEL`] reaches the
//! holder's [`CancelWatch`](crate::executor::cancel_watch::CancelWatch), whose heartbeat then
//! checks the lease at once and finds it gone (the next regular heartbeat does if the
//! notification was missed).

use std::time::Duration;

use rara_store::Store;
use rara_store::detach::DetachedAttempt;
use uuid::Uuid;

/// How long telling a remote executor to stop a detached attempt may take.
pub const DETACHED_CANCEL_TIMEOUT: Duration = Duration::from_secs(3);

/// What a cancel did.
#[derive(Debug)]
pub struct Cancelled {
    /// `"run"` or `"step"`: what the id named.
    pub kind: &'static str,
    /// Steps cancelled (0: nothing was left to cancel).
    pub steps: u64,
    /// Each detached attempt and whether its executor was told (`Ok(found)`: it answered,
    /// and said whether the attempt was still running there).
    pub told: Vec<(DetachedAttempt, Result<bool, rara_remote::cancel::Error>)>,
}

/// Cancels the run `id`, or else the step `id`, with `reason`.
pub async fn cancel(store: &Store, id: Uuid, reason: &str) -> Result<Cancelled, rara_store::Error> {
    // Read before the cancel: once cancelled, a step no longer says where it runs.
    let detached = store.detached_attempts(id).await?;
    let (kind, steps) = match store.cancel_run(id, reason).await {
        Ok(n) => ("run", n),
        Err(rara_store::Error::RunNotFound(_)) => ("step", u64::from(store.cancel_step(id, reason).await?)),
        Err(e) => return Err(e),
    };
    let why = format!("the {kind} was cancelled: {reason}");
    let mut told = Vec::with_capacity(detached.len());
    for attempt in detached {
        let answer = rara_remote::cancel::cancel_detached(
            &attempt.endpoint,
            attempt.step_id,
            attempt.attempt,
            &why,
            DETACHED_CANCEL_TIMEOUT,
        )
        .await;
        told.push((attempt, answer));
    }
    Ok(Cancelled { kind, steps, told })
}
