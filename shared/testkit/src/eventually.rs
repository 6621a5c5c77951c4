//! [`eventually`]: a test waits for *state*, not for time. It polls a condition until it holds
//! and fails, past its timeout, saying what it waited for and the last value it saw; a
//! `sleep` long enough "on this machine" is a race on a slower one.
//!
//! A condition is an async closure whose answer is a [`Condition`]: `bool` (holds when
//! `true`), `Option<T>` (holds on `Some`, giving `T`) or `Result<T, E>` (holds on `Ok`,
//! giving `T`; an `Err` is the last value seen, printed with `Debug` if the wait times out).
//!
//! ```no_run
//! # async fn demo(count: impl Fn() -> usize) {
//! use rara_testkit::eventually::eventually;
//! // Waits until three rows are in; a timeout says "three rows are in (last seen: 2)".
//! eventually("three rows are in", || async { if count() == 3 { Ok(()) } else { Err(count()) } }).await;
//! # }
//! ```

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// How long [`eventually`] waits before it fails the test.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// How often [`eventually`] asks again: short against any state change a test waits for,
/// long enough not to load the database or the machine it polls.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Polls `check` every [`POLL_INTERVAL`] until it holds and returns what it gave; panics after
/// [`DEFAULT_TIMEOUT`] with `what` and the last value seen.
pub async fn eventually<F, Fut>(what: &str, check: F) -> <Fut::Output as Condition>::Value
where
    F: FnMut() -> Fut,
    Fut: Future,
    Fut::Output: Condition,
{
    eventually_within(what, DEFAULT_TIMEOUT, check).await
}

/// [`eventually`] with its own timeout.
pub async fn eventually_within<F, Fut>(what: &str, within: Duration, mut check: F) -> <Fut::Output as Condition>::Value
where
    F: FnMut() -> Fut,
    Fut: Future,
    Fut::Output: Condition,
{
    let deadline = Instant::now() + within;
    loop {
        let last = match check().await.holds() {
            Ok(value) => return value,
            Err(last) => last,
        };
        assert!(Instant::now() < deadline, "timed out after {within:?} waiting until {what} (last seen: {last})");
        tokio::time::sleep(POLL_INTERVAL.min(deadline.saturating_duration_since(Instant::now()))).await;
    }
}

/// The answer of a condition [`eventually`] polls: it holds, giving a value, or it does not,
/// giving what was seen (for the failure message).
pub trait Condition {
    type Value;
    fn holds(self) -> Result<Self::Value, String>;
}

impl Condition for bool {
    type Value = ();
    fn holds(self) -> Result<(), String> {
        if self { Ok(()) } else { Err("false".into()) }
    }
}

impl<T> Condition for Option<T> {
    type Value = T;
    fn holds(self) -> Result<T, String> {
        self.ok_or_else(|| "None".into())
    }
}

impl<T, E: Debug> Condition for Result<T, E> {
    type Value = T;
    fn holds(self) -> Result<T, String> {
        self.map_err(|last| format!("{last:?}"))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[tokio::test]
    async fn a_condition_that_comes_to_hold_gives_its_value() {
        let polls = AtomicU32::new(0);
        let value = eventually("the third poll", || async {
            let n = polls.fetch_add(1, Ordering::SeqCst) + 1;
            if n == 3 { Some(n * 10) } else { None }
        })
        .await;
        assert_eq!(value, 30);
    }

    #[tokio::test]
    async fn a_bool_condition_holds_when_true() {
        let polls = AtomicU32::new(0);
        eventually("two polls", || async { polls.fetch_add(1, Ordering::SeqCst) == 1 }).await;
        assert_eq!(polls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    #[should_panic(expected = "waiting until the count is 5 (last seen: 2)")]
    async fn a_timeout_says_what_was_awaited_and_the_last_value_seen() {
        eventually_within("the count is 5", Duration::from_millis(100), || async { Err::<(), _>(2) }).await;
    }
}
