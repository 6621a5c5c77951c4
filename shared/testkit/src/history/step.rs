//! The rules of one step's history: it ends terminal, its attempts are numbered and fenced in
//! order, at most one outcome commits, only the current holder's attempt is open.

use uuid::Uuid;

use super::{Report, Violation};

const TERMINAL: [&str; 4] = ["succeeded", "failed", "cancelled", "skipped"];

#[derive(sqlx::FromRow)]
pub(super) struct StepRow {
    pub(super) id: Uuid,
    pub(super) status: String,
    pub(super) attempt: i32,
    pub(super) fence: Option<i64>,
}

#[derive(sqlx::FromRow)]
pub(super) struct AttemptRow {
    pub(super) step_id: Uuid,
    pub(super) attempt: i32,
    pub(super) fence: i64,
    pub(super) outcome: String,
}

pub(super) fn check_step(step: &StepRow, attempts: &[&AttemptRow], report: &mut Report, v: &mut Vec<Violation>) {
    let id = step.id;
    match step.status.as_str() {
        "succeeded" => report.steps_succeeded += 1,
        "failed" => report.steps_failed += 1,
        _ => {}
    }
    if !TERMINAL.contains(&step.status.as_str()) {
        report.lost_steps += 1;
        v.push(Violation { rule: "every step ends terminal", detail: format!("step {id} is {}", step.status) });
    }
    check_numbering(step, attempts, v);
    if check_outcomes(step, attempts, v) {
        report.duplicate_outcomes += 1;
    }
    check_open(step, attempts, v);
}

/// Attempts are numbered 1..=n with n = steps.attempt, and every claim took a larger fence.
fn check_numbering(step: &StepRow, attempts: &[&AttemptRow], v: &mut Vec<Violation>) {
    let id = step.id;
    let numbers: Vec<i32> = attempts.iter().map(|a| a.attempt).collect();
    if numbers != (1..=step.attempt).collect::<Vec<_>>() {
        v.push(Violation {
            rule: "one attempt row per counted attempt",
            detail: format!("step {id} counts {} attempts, rows {numbers:?}", step.attempt),
        });
    }
    for pair in attempts.windows(2) {
        if pair[1].fence <= pair[0].fence {
            v.push(Violation {
                rule: "fences strictly grow per step",
                detail: format!(
                    "step {id}: attempt {} fence {} after attempt {} fence {}",
                    pair[1].attempt, pair[1].fence, pair[0].attempt, pair[0].fence
                ),
            });
        }
    }
}

/// At most one committed outcome, which ends the step and is the step's own; whether an
/// outcome was duplicated (a second commit, or a success its fence's holder did not write).
fn check_outcomes(step: &StepRow, attempts: &[&AttemptRow], v: &mut Vec<Violation>) -> bool {
    let id = step.id;
    let committed: Vec<&&AttemptRow> =
        attempts.iter().filter(|a| a.outcome == "succeeded" || a.outcome == "failed").collect();
    let successes = attempts.iter().filter(|a| a.outcome == "succeeded").count();
    let mut duplicate = false;
    if committed.len() > 1 || successes > 1 {
        duplicate = true;
        v.push(Violation {
            rule: "at most one committed outcome per step",
            detail: format!(
                "step {id}: {} committed outcomes ({successes} successes) in attempts {:?}",
                committed.len(),
                committed.iter().map(|a| a.attempt).collect::<Vec<_>>()
            ),
        });
    }
    let last = attempts.last();
    if let Some(c) = committed.first()
        && last.is_some_and(|l| l.attempt != c.attempt)
    {
        duplicate = true;
        v.push(Violation {
            rule: "a committed outcome ends the step",
            detail: format!("step {id}: attempt {} committed, later attempts ran", c.attempt),
        });
    }
    if step.status == "succeeded" {
        let landed = last.is_some_and(|l| l.outcome == "succeeded" && Some(l.fence) == step.fence);
        if !landed {
            duplicate = true;
            v.push(Violation {
                rule: "a success is written by the holder of the last fence",
                detail: format!(
                    "step {id} succeeded under fence {:?}; last attempt {:?}",
                    step.fence,
                    last.map(|l| (l.attempt, l.fence, l.outcome.as_str()))
                ),
            });
        }
    }
    if step.status == "failed" && !last.is_some_and(|l| l.outcome == "failed" || l.outcome == "lease_expired") {
        v.push(Violation {
            rule: "a failure closes the last attempt",
            detail: format!("step {id} failed; last attempt {:?}", last.map(|l| l.outcome.as_str())),
        });
    }
    duplicate
}

/// Only the current holder's attempt is open.
fn check_open(step: &StepRow, attempts: &[&AttemptRow], v: &mut Vec<Violation>) {
    let id = step.id;
    let last = attempts.last();
    let running: Vec<i32> = attempts.iter().filter(|a| a.outcome == "running").map(|a| a.attempt).collect();
    let may_run = step.status == "running" && running.len() == 1 && last.is_some_and(|l| l.outcome == "running");
    if !running.is_empty() && !may_run {
        v.push(Violation {
            rule: "only the current holder's attempt is open",
            detail: format!("step {id} is {} with open attempts {running:?}", step.status),
        });
    }
}
