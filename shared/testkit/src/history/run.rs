//! The rules of one run: it ends terminal, with no unfinished step, and succeeds exactly when
//! all its steps do.

use uuid::Uuid;

use super::{Report, Violation};

#[derive(sqlx::FromRow)]
pub(super) struct RunRow {
    pub(super) id: Uuid,
    pub(super) status: String,
    pub(super) steps_unfinished: i32,
    pub(super) steps_total: i32,
    pub(super) succeeded: i64,
}

pub(super) fn check_run(run: &RunRow, report: &mut Report, v: &mut Vec<Violation>) {
    let id = run.id;
    if run.status == "running" {
        report.runs_unfinished += 1;
        v.push(Violation { rule: "every run ends terminal", detail: format!("run {id} is still running") });
    } else if run.steps_unfinished != 0 {
        v.push(Violation {
            rule: "a finished run has no unfinished steps",
            detail: format!("run {id} is {} with {} unfinished", run.status, run.steps_unfinished),
        });
    }
    let all_succeeded = run.succeeded == i64::from(run.steps_total);
    if (run.status == "succeeded") != all_succeeded && run.status != "running" {
        v.push(Violation {
            rule: "a run succeeds exactly when all its steps do",
            detail: format!("run {id} is {} with {}/{} steps succeeded", run.status, run.succeeded, run.steps_total),
        });
    }
}
