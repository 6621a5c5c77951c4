//! The end of an execution, decided in one place (docs/src/internals/deadlines.md, "Who
//! decides an attempt's end").
//!
//! An execution (`execute`, next door) waits for the first of five things: the executor
//! returns, the park time, the execution's end, a lost lease, the runner's interrupt. Two of
//! them can be ready at once (an in-process executor's own deadline *is* the execution's end,
//! so its `DEADLINE_EXCEEDED` and the end's timer fire together), and `select!` picks either.
//! So the branch that woke it decides nothing: [`decide`] reads the facts (what the executor
//! returned, if it has, the clock against the deadlines, the tokens) in a fixed order, and the
//! same facts always give the same end.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use rara_domain::StepError;
use rara_domain::executor::{Detach, Resume};
use rara_domain::step_error::codes;
use rara_store::children::ChildStart;
use rara_store::claim::ClaimedStep;
use rara_store::map::Expansion;
use tokio::task::JoinError;
use tokio::time::Instant;
use tokio_util::task::AbortOnDropHandle;

use crate::executor::returned;
use crate::secrets;

/// How an execution ended, before its outcome is recorded.
#[derive(Debug, Clone, PartialEq)]
pub enum Execution {
    Succeeded(serde_json::Value),
    Failed(StepError),
    /// The lease was lost (cancelled, reaped or taken over): write nothing more.
    LeaseLost,
    /// The runner is stopping and its grace is over: give the step back (fenced).
    Interrupted,
    /// The invocation ends (or the runner stops) while a detachable remote attempt runs: it
    /// goes on detached, here; park the step (fenced) so its message comes back to re-attach.
    Parked(Resume),
    /// A map step's first claim: create its children (fenced); it waits on them.
    Expanded(Expansion),
    /// A child workflow step's claim: make its child run and let it wait for it (fenced).
    Child(Box<ChildStart>),
}

/// What an executor's task returned.
pub(super) type Joined = Result<Result<serde_json::Value, StepError>, JoinError>;

/// When an execution ends, or is parked.
#[derive(Debug, Clone, Copy)]
pub(super) struct Timing {
    /// The end of the execution: the step's own deadline for a detachable attempt (parked
    /// before it), else the sooner of that and the invocation's.
    pub run_until: Instant,
    /// When a detachable attempt is parked (`None`: not detachable, or it ends before).
    pub park_at: Option<Instant>,
    /// Whether the invocation's end, not the step's timeout, cuts the execution.
    pub cut_by_invocation: bool,
}

impl Timing {
    pub(super) fn new(
        attach_window: Option<std::time::Duration>,
        step: &ClaimedStep,
        detachable: bool,
        deadline: Instant,
    ) -> Self {
        let step_deadline = step_deadline(step);
        // A detachable attempt runs to the step's own deadline and is parked at the
        // invocation's end, or when the attach window closes (Lambda time is paid only while
        // attached); any other execution ends with the invocation.
        let park_point = attach_window.map_or(deadline, |window| deadline.min(Instant::now() + window));
        let park_at = (detachable && step_deadline > park_point).then_some(park_point);
        let run_until = if park_at.is_some() { step_deadline } else { deadline.min(step_deadline) };
        Timing { run_until, park_at, cut_by_invocation: park_at.is_none() && step_deadline > deadline }
    }
}

/// When the step's attempt must end: its timeout from the attempt's start (the claim, or an
/// earlier claim for a re-attached attempt; both on the database's clock).
fn step_deadline(step: &ClaimedStep) -> Instant {
    let elapsed = (step.attached_at - step.started_at).to_std().unwrap_or_default();
    Instant::now() + step.timeout.saturating_sub(elapsed)
}

/// What the end is decided from, read once the execution's `select!` woke.
#[derive(Debug, Clone, Copy)]
pub(super) struct Facts {
    pub now: Instant,
    /// The lease is gone (a heartbeat or a report found out).
    pub lost: bool,
    /// The stopping runner's grace is over.
    pub interrupted: bool,
    /// The executor let go of a detachable attempt (it goes on remotely).
    pub let_go: bool,
}

/// How an execution ends.
#[derive(Debug, PartialEq)]
pub(super) enum Decision {
    /// The executor returned an output.
    Output(serde_json::Value),
    /// The executor failed on its own (or its task panicked).
    Failed(StepError),
    /// A detached attempt could not be re-attached now: it is still detached.
    StillDetached,
    /// The lease is gone: stop and write nothing.
    LeaseLost,
    /// The execution's end ([`past_deadline`]): the invocation's cut or the step's deadline.
    End,
    /// The park time: a detachable attempt is let go.
    Park,
    /// The runner's grace is over: park or give back.
    Interrupt,
}

/// The end of an execution, from the facts, whichever `select!` branch woke first:
///
/// 1. an output the executor returned is the execution's, whenever it came (work that is done
///    wins a tie, as in the built-ins' guard); a panic likewise;
/// 2. an error of a detachable executor that let go: still detached;
/// 3. the lease lost;
/// 4. the end: the clock at or past `run_until`, or the executor's own `DEADLINE_EXCEEDED`
///    when the end is the invocation's cut (its deadline is that cut: the cut's outcome,
///    `STEP_OUTLIVES_INVOCATION`, not a retry);
/// 5. an error the executor returned before the end is its own;
/// 6. still running: the park time reached, then the runner's interrupt.
pub(super) fn decide(returned: Option<Joined>, timing: &Timing, facts: &Facts) -> Decision {
    let ended = facts.now >= timing.run_until;
    match returned {
        Some(Ok(Ok(output))) => Decision::Output(output),
        Some(Err(join)) => Decision::Failed(StepError::retryable(
            codes::EXECUTOR_PANICKED,
            if join.is_panic() { "the executor panicked" } else { "the executor task was aborted" },
        )),
        Some(Ok(Err(_))) if facts.let_go => Decision::StillDetached,
        Some(Ok(Err(error))) if facts.lost => {
            tracing::info!(code = %error.code, "execution stopped after its lease was lost");
            Decision::LeaseLost
        }
        Some(Ok(Err(error))) if ended || (timing.cut_by_invocation && error.code == codes::DEADLINE_EXCEEDED) => {
            Decision::End
        }
        Some(Ok(Err(error))) => Decision::Failed(error),
        None if facts.lost => Decision::LeaseLost,
        None if ended => Decision::End,
        None if timing.park_at.is_some_and(|at| facts.now >= at) => Decision::Park,
        None if facts.interrupted => Decision::Interrupt,
        // Every wake-up sets one of the facts above; a timer's is its time reached.
        None => Decision::End,
    }
}

/// What the executor's task returned, if it has, without waiting: a task that finished at
/// the same instant as a timer is seen whichever of them woke the execution. Polled outside
/// tokio's cooperative budget, which once spent makes a finished task look pending.
pub(super) async fn returned_now(task: &mut AbortOnDropHandle<Result<serde_json::Value, StepError>>) -> Option<Joined> {
    let once = std::future::poll_fn(|cx| match Pin::new(&mut *task).poll(cx) {
        Poll::Ready(joined) => Poll::Ready(Some(joined)),
        Poll::Pending => Poll::Ready(None),
    });
    tokio::task::unconstrained(once).await
}

/// Why an execution that reached its end without an outcome stops, and its failure: the
/// invocation's end cut a step whose timeout does not fit one (for good), or the step ran
/// past its deadline (retryable).
pub(super) fn past_deadline(step: &ClaimedStep, cut_by_invocation: bool) -> (String, StepError) {
    if cut_by_invocation {
        let message = format!(
            "the step ran until its invocation's end, and its executor cannot detach: the step's timeout \
             ({}) does not fit one invocation (RARA_FUNCTION_TIMEOUT_SECONDS less RARA_DEADLINE_MARGIN_MS)",
            rara_domain::human::duration(step.timeout)
        );
        (message.clone(), StepError::permanent(codes::STEP_OUTLIVES_INVOCATION, message))
    } else {
        let message = format!(
            "the step ran past its deadline ({} step timeout, or the invocation's end)",
            rara_domain::human::duration(step.timeout)
        );
        (message.clone(), StepError::retryable(codes::DEADLINE_EXCEEDED, message))
    }
}

/// A success, unless the output is beyond its bound ([`returned::bounded`]).
pub(super) fn succeeded(
    output: serde_json::Value,
    redactor: &secrets::Redactor,
    limits: &rara_remote::Limits,
) -> Execution {
    returned::bounded(output, redactor, limits).map_or_else(Execution::Failed, Execution::Succeeded)
}

/// Tells a detachable executor to let go of its attempt and waits (bounded) until it has: the
/// attempt goes on remotely. An outcome that arrived meanwhile is the execution's.
pub(super) async fn park(
    task: &mut AbortOnDropHandle<Result<serde_json::Value, StepError>>,
    detach: &Detach,
    redactor: &secrets::Redactor,
    limits: &rara_remote::Limits,
) -> Execution {
    detach.park.cancel();
    match tokio::time::timeout(DEADLINE_STOP_GRACE, &mut *task).await {
        Ok(Ok(Ok(output))) => return succeeded(output, redactor, limits),
        Ok(Ok(Err(error))) if !detach.was_let_go() => return Execution::Failed(redactor.error(error)),
        Ok(_) => {}
        // Aborting drops the call, which a detachable attempt outlives.
        Err(_) => task.abort(),
    }
    parked(detach)
}

/// The detached attempt's resume point, or a retryable failure if the attempt never started
/// anywhere (nothing runs detached: a new attempt is the way on).
pub(super) fn parked(detach: &Detach) -> Execution {
    match detach.resume_point() {
        Some(resume) => Execution::Parked(resume),
        None => Execution::Failed(StepError::retryable(
            codes::EXECUTOR_UNAVAILABLE,
            "the invocation ended before the remote attempt started",
        )),
    }
}

/// How long an executor stopped at the deadline (or parked) may take: the margin after the
/// deadline is for recording the outcome.
pub(super) const DEADLINE_STOP_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn timing(cut_by_invocation: bool, park_at: Option<Instant>) -> (Timing, Instant) {
        let now = Instant::now();
        (Timing { run_until: now, park_at, cut_by_invocation }, now)
    }

    fn facts(now: Instant) -> Facts {
        Facts { now, lost: false, interrupted: false, let_go: false }
    }

    fn deadline_exceeded() -> Option<Joined> {
        Some(Ok(Err(StepError::retryable(codes::DEADLINE_EXCEEDED, "sleep: the execution deadline passed"))))
    }

    #[test]
    fn at_the_cut_the_executors_deadline_error_and_the_timer_decide_the_same() {
        let (timing, now) = timing(true, None);
        // Whichever woke the select: the executor's error first, or the timer (task unseen).
        assert_eq!(decide(deadline_exceeded(), &timing, &facts(now)), Decision::End);
        assert_eq!(decide(None, &timing, &facts(now)), Decision::End);
        // The executor's own deadline is the cut's even when its clock ran a little ahead.
        let early = facts(now - Duration::from_millis(3));
        assert_eq!(decide(deadline_exceeded(), &timing, &early), Decision::End);
    }

    #[test]
    fn an_output_wins_a_tie_and_an_error_before_the_end_is_the_executors() {
        let (timing, now) = timing(false, None);
        let output = Some(Ok(Ok(serde_json::json!(1))));
        assert_eq!(decide(output, &timing, &facts(now)), Decision::Output(serde_json::json!(1)));
        let before = facts(now - Duration::from_millis(3));
        let Decision::Failed(error) = decide(deadline_exceeded(), &timing, &before) else { panic!() };
        assert_eq!(error.code, codes::DEADLINE_EXCEEDED);
    }

    #[test]
    fn a_lost_lease_comes_before_the_end_and_the_end_before_park_and_interrupt() {
        let park_at = Instant::now();
        let (timing, now) = timing(true, Some(park_at));
        let lost = Facts { lost: true, interrupted: true, ..facts(now) };
        assert_eq!(decide(deadline_exceeded(), &timing, &lost), Decision::LeaseLost);
        assert_eq!(decide(None, &timing, &lost), Decision::LeaseLost);
        let interrupted = Facts { interrupted: true, ..facts(now) };
        assert_eq!(decide(None, &timing, &interrupted), Decision::End);
        let long = Timing { run_until: now + Duration::from_secs(60), ..timing };
        assert_eq!(decide(None, &long, &interrupted), Decision::Park);
        let parks_later = Timing { park_at: Some(now + Duration::from_secs(1)), ..long };
        assert_eq!(decide(None, &parks_later, &interrupted), Decision::Interrupt);
    }
}
