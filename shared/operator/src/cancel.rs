//! An operator's cancel of a run (every unfinished step) or of one step, as the CLI (and any
//! other front end) performs it: the store's cancel, then every attempt that runs detached on
//! a remote executor is told at once (DESIGN.md "Long steps"), the executors concurrently.
//! Attached attempts hear it from their holder: the cancel's `NOTIFY` on
//! [`rara_store::listen::CANCEL_CHANNEL`] reaches the holder's cancel watch, whose heartbeat
//! then checks the lease at once and finds it gone (the next regular heartbeat does if the
//! notification was missed).

use std::time::Duration;

use futures::StreamExt;
use rara_remote::Security;
use rara_store::Store;
use rara_store::detach::DetachedAttempt;
use uuid::Uuid;

/// How long telling a remote executor to stop a detached attempt may take.
pub const DETACHED_CANCEL_TIMEOUT: Duration = Duration::from_secs(3);

/// How many remote executors are told at the same time: a bulk cancel of many detached
/// attempts waits for about one [`DETACHED_CANCEL_TIMEOUT`] per this many unreachable
/// executors, not one per attempt, and opens no more connections than this at once.
pub const TELL_CONCURRENCY: usize = 16;

/// Each detached attempt and whether its executor was told (`Ok(found)`: it answered, and
/// said whether the attempt was still running there).
pub type Told = Vec<(DetachedAttempt, Result<bool, rara_remote::cancel::Error>)>;

/// What a cancel did.
#[derive(Debug)]
pub struct Cancelled {
    /// `"run"` or `"step"`: what the id named.
    pub kind: &'static str,
    /// Steps cancelled (0: nothing was left to cancel).
    pub steps: u64,
    /// Each detached attempt and whether its executor was told.
    pub told: Told,
}

/// Cancels the run `id`, or else the step `id`, with `reason`; detached attempts are told
/// without a token (see [`cancel_with`]).
pub async fn cancel(store: &Store, id: Uuid, reason: &str) -> Result<Cancelled, rara_store::Error> {
    cancel_with(&Security::default(), store, id, reason).await
}

/// [`cancel`], telling detached attempts with the TLS settings, token and attempt secrets of
/// `security` (what executors that ask for a token need).
pub async fn cancel_with(
    security: &Security,
    store: &Store,
    id: Uuid,
    reason: &str,
) -> Result<Cancelled, rara_store::Error> {
    // Read before the cancel: once cancelled, a step no longer says where it runs.
    let detached = store.detached_attempts(id).await?;
    let (kind, steps) = match store.cancel_run(id, reason).await {
        Ok(n) => ("run", n),
        Err(rara_store::Error::RunNotFound(_)) => ("step", u64::from(store.cancel_step(id, reason).await?)),
        Err(e) => return Err(e),
    };
    let told = tell_with(security, detached, &format!("the {kind} was cancelled: {reason}")).await;
    Ok(Cancelled { kind, steps, told })
}

/// Tells the executor of each of `attempts` to stop it, with `why`: [`TELL_CONCURRENCY`] at a
/// time, each within [`DETACHED_CANCEL_TIMEOUT`]. The answers come in the order of `attempts`.
pub async fn tell(attempts: Vec<DetachedAttempt>, why: &str) -> Told {
    tell_with(&Security::default(), attempts, why).await
}

/// [`tell`] with the TLS settings, token and attempt secrets of `security`.
pub async fn tell_with(security: &Security, attempts: Vec<DetachedAttempt>, why: &str) -> Told {
    futures::stream::iter(attempts)
        .map(|attempt| async move {
            let answer = rara_remote::cancel::cancel_detached_with(
                security,
                &attempt.endpoint,
                attempt.step_id,
                attempt.attempt,
                why,
                DETACHED_CANCEL_TIMEOUT,
            )
            .await;
            (attempt, answer)
        })
        .buffered(TELL_CONCURRENCY)
        .collect()
        .await
}
