//! A stopping runner's last calls: once its grace is over ([`after_interrupt`]), a call to
//! the queue or to Postgres gets [`LAST_CALL_BOUND`] more, then is given up.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// How long a call to the queue may still take once a stopping runner's grace is over.
pub const LAST_CALL_BOUND: Duration = Duration::from_secs(2);

/// Runs `call`; once `interrupt` has fired, for at most [`LAST_CALL_BOUND`] more (`None`:
/// given up).
pub async fn after_interrupt<T>(interrupt: &CancellationToken, call: impl Future<Output = T>) -> Option<T> {
    let cut = async {
        interrupt.cancelled().await;
        tokio::time::sleep(LAST_CALL_BOUND).await;
    };
    // A call that finished is kept even when the bound passes with it.
    tokio::select! {
        biased;
        out = call => Some(out),
        _ = cut => None,
    }
}
