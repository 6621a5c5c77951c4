//! Step, run and attempt states (DESIGN.md "Step states").
//!
//! ```text
//! pending ──lease──▶ leased ──claim──▶ running ──▶ succeeded | failed | cancelled
//!    ▲                 ▲                  │
//!    │                 └──── retry ───────┘
//!    └── reaper (expired lease) ──────────┘
//! ```
//! A step whose dependency failed or was cancelled never runs: it ends `skipped`. A step that
//! waits (a timer, a signal, an event: [`crate::wait`]) is never leased: the scheduler starts
//! it (`pending ──start──▶ waiting`) and whatever completes it first ends it (`waiting ──▶
//! succeeded | failed`), or an operator cancels it.

use serde::{Deserialize, Serialize};

/// Where a step is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type))]
#[cfg_attr(feature = "sqlx", sqlx(type_name = "rara_step_status", rename_all = "snake_case"))]
pub enum StepStatus {
    Pending,
    /// A wait under way (timer, signal, event): no lease, no message, nothing running.
    Waiting,
    Leased,
    Running,
    Succeeded,
    Failed,
    Cancelled,
    Skipped,
}

/// The transitions of the step state machine, named for what causes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// The scheduler leases a due step.
    Lease,
    /// The scheduler could not enqueue the message and gives the lease back.
    Release,
    /// The executor's message claims the step (or takes over from a dead holder).
    Claim,
    /// The holder records success.
    Succeed,
    /// The holder records a retryable failure that rides on the message (same lease).
    RetryViaMessage,
    /// The holder records a retryable failure that goes back through Postgres.
    RetryViaPostgres,
    /// The holder records a permanent failure, or the reaper finds no attempts left.
    Fail,
    /// An operator cancels the step or its run.
    Cancel,
    /// A dependency failed or was cancelled: the step will never run.
    Skip,
    /// The reaper returns a step whose lease expired.
    Reap,
    /// The scheduler starts a due wait.
    StartWait,
    /// What the wait waited for came (or its timer or timeout): the step succeeds or fails.
    CompleteWait,
}

impl StepStatus {
    pub const ALL: [StepStatus; 8] = [
        StepStatus::Pending,
        StepStatus::Waiting,
        StepStatus::Leased,
        StepStatus::Running,
        StepStatus::Succeeded,
        StepStatus::Failed,
        StepStatus::Cancelled,
        StepStatus::Skipped,
    ];

    /// A terminal step never changes again.
    pub fn is_terminal(self) -> bool {
        matches!(self, StepStatus::Succeeded | StepStatus::Failed | StepStatus::Cancelled | StepStatus::Skipped)
    }

    /// Whether a lease (token, holder, expiry) must be present in this state.
    pub fn holds_lease(self) -> bool {
        matches!(self, StepStatus::Leased | StepStatus::Running)
    }

    /// The state a transition leads to from `self`, or `None` when the state machine forbids it.
    pub fn apply(self, transition: Transition) -> Option<StepStatus> {
        use StepStatus as S;
        use Transition as T;
        match (self, transition) {
            (S::Pending, T::Lease) => Some(S::Leased),
            (S::Leased, T::Release) => Some(S::Pending),
            (S::Leased | S::Running, T::Claim) => Some(S::Running),
            (S::Running, T::Succeed) => Some(S::Succeeded),
            (S::Running, T::RetryViaMessage) => Some(S::Leased),
            (S::Running, T::RetryViaPostgres) => Some(S::Pending),
            (S::Running, T::Fail) => Some(S::Failed),
            (S::Pending | S::Waiting | S::Leased | S::Running, T::Cancel) => Some(S::Cancelled),
            (S::Pending, T::StartWait) => Some(S::Waiting),
            // Which of the two the completion decided is the wait's own (a rejection, a timeout).
            (S::Waiting, T::CompleteWait) => Some(S::Succeeded),
            (S::Pending, T::Skip) => Some(S::Skipped),
            (S::Leased | S::Running, T::Reap) => Some(S::Pending),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Pending => "pending",
            StepStatus::Waiting => "waiting",
            StepStatus::Leased => "leased",
            StepStatus::Running => "running",
            StepStatus::Succeeded => "succeeded",
            StepStatus::Failed => "failed",
            StepStatus::Cancelled => "cancelled",
            StepStatus::Skipped => "skipped",
        }
    }
}

impl std::fmt::Display for StepStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a workflow run is. A run finishes when its last step does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type))]
#[cfg_attr(feature = "sqlx", sqlx(type_name = "rara_run_status", rename_all = "snake_case"))]
pub enum RunStatus {
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl RunStatus {
    pub fn is_terminal(self) -> bool {
        self != RunStatus::Running
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }

    /// The status of a run whose steps have all finished: any failure fails it, else any
    /// cancellation cancels it, else it succeeded.
    pub fn of_finished(failed: usize, cancelled: usize) -> RunStatus {
        if failed > 0 {
            RunStatus::Failed
        } else if cancelled > 0 {
            RunStatus::Cancelled
        } else {
            RunStatus::Succeeded
        }
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How one attempt (one execution) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type))]
#[cfg_attr(feature = "sqlx", sqlx(type_name = "rara_attempt_outcome", rename_all = "snake_case"))]
pub enum AttemptOutcome {
    Running,
    Succeeded,
    /// Failed retryably; another attempt follows.
    Retrying,
    Failed,
    Cancelled,
    /// The holder's lease expired before it recorded an outcome.
    LeaseExpired,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_states_accept_no_transition() {
        let all = [
            Transition::Lease,
            Transition::Release,
            Transition::Claim,
            Transition::Succeed,
            Transition::RetryViaMessage,
            Transition::RetryViaPostgres,
            Transition::Fail,
            Transition::Cancel,
            Transition::Skip,
            Transition::Reap,
            Transition::StartWait,
            Transition::CompleteWait,
        ];
        for status in StepStatus::ALL.into_iter().filter(|s| s.is_terminal()) {
            for t in all {
                assert_eq!(status.apply(t), None, "{status} must not accept {t:?}");
            }
        }
    }

    #[test]
    fn only_running_steps_record_outcomes() {
        for status in StepStatus::ALL {
            let allowed = status.apply(Transition::Succeed).is_some();
            assert_eq!(allowed, status == StepStatus::Running, "{status}");
        }
    }

    #[test]
    fn run_status_prefers_failure_then_cancellation() {
        assert_eq!(RunStatus::of_finished(1, 1), RunStatus::Failed);
        assert_eq!(RunStatus::of_finished(0, 2), RunStatus::Cancelled);
        assert_eq!(RunStatus::of_finished(0, 0), RunStatus::Succeeded);
    }
}
