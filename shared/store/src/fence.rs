//! The fence rule (DESIGN.md "Lease ownership"), written once: every write after a claim
//! changes a step only while the same worker holds it under the same fence and it is
//! `running`. A write that matches no row, or a batch that leaves out a holder's row,
//! answers [`Error::LeaseLost`]: the holder must stop and write nothing more.
//!
//! A quick step (`quick.rs`) has no write after its claim: it is locked, run and
//! written in one transaction, and its one write carries the claim's own conditions (lease
//! token, `leased`), which the row lock kept true from the read to the write.
//!
//! Statements do not spell the rule; their `.sql` files say where it goes:
//!
//! - `{holder}`: one holder bound as `$1` (step id), `$2` (worker), `$3` (fence), the step
//!   row named `s` (`one`);
//! - `{holders}`: a batch, the holders in the columns `step_id`, `worker`, `fence` of an
//!   input named `i` (an `unnest` of `$1::uuid[]`, `$2::text[]`, `$3::bigint[]`), the step
//!   row named `s` (`batch`). Its status condition is spelled
//!   `(s.status = 'running') IS TRUE`, so batches find their rows by primary key (see the
//!   crate docs), and its key condition `s.id = ANY (ARRAY[i.step_id])`, so the batch drives:
//!   one probe of `steps_pkey` per holder, whatever the statistics say. As an equality
//!   (`s.id = i.step_id`), statistics taken while every step was pending (autovacuum off or
//!   not yet run: no step held by anyone, to the planner) made it read `steps` whole in key
//!   order and compare every running step with the whole batch, 20 M comparisons and 5–7 s
//!   for 1,000 holders behind 20,000 running steps (issue 50, `tests/outcome_plan.rs`). An
//!   array membership can be neither merged nor hashed, so the only plan left with
//!   sequential scans off (`SESSION_SETTINGS`) is a nested loop over the input. The write
//!   still finds its row by key, not by `ctid`: when the holder's own heartbeat updated the
//!   row while the write waited for it, Postgres re-checks the row's newest version against
//!   this predicate and writes it (by `ctid`, the newest version is invisible to the
//!   statement's snapshot and the TID re-check rejects it: a false `LeaseLost`).

use uuid::Uuid;

use crate::Error;

/// Who holds a running step: the triple every write after the claim is conditional on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Holder {
    pub step_id: Uuid,
    /// The worker identity that claimed the step (`leased_by`).
    pub worker: String,
    /// The fence issued at the claim.
    pub fence: i64,
}

impl Holder {
    /// The answer to a fenced write of this holder that matched no row.
    pub fn lost(&self) -> Error {
        Error::LeaseLost { step_id: self.step_id, fence: self.fence }
    }
}

/// The predicate for one holder (`$1`, `$2`, `$3`).
const ONE: &str = "s.id = $1::uuid AND s.leased_by = $2::text AND s.fence = $3::bigint AND s.status = 'running'";

/// The predicate for a batch of holders (`i.step_id`, `i.worker`, `i.fence`); the key as an
/// array membership so that the input drives (module docs).
const BATCH: &str =
    "s.id = ANY (ARRAY[i.step_id]) AND s.leased_by = i.worker AND s.fence = i.fence AND (s.status = 'running') IS TRUE";

/// A single-holder statement: `template` with `{holder}` replaced by the predicate.
pub(crate) fn one(template: &str) -> String {
    compose(template, "{holder}", ONE)
}

/// A batch statement: `template` with `{holders}` replaced by the predicate.
pub(crate) fn batch(template: &str) -> String {
    compose(template, "{holders}", BATCH)
}

/// A template without its marker would be a write without its fence: refuse to build it
/// (at the first use of the statement, and in `tests/catalogue.rs`, which composes them all).
fn compose(template: &str, marker: &str, predicate: &str) -> String {
    assert_eq!(template.matches(marker).count(), 1, "a fenced statement names its holder once:\n{template}");
    template.replace(marker, predicate)
}

/// The result of a single-holder write: a row (or a changed row count above zero) keeps the
/// lease, nothing loses it.
pub(crate) fn expect_row<T>(holder: &Holder, row: Option<T>) -> Result<T, Error> {
    row.ok_or_else(|| holder.lost())
}

/// Same as [`expect_row`], for a statement that returns no rows but a count.
pub(crate) fn expect_changed(holder: &Holder, rows_affected: u64) -> Result<(), Error> {
    if rows_affected == 0 { Err(holder.lost()) } else { Ok(()) }
}

/// The bind columns of a batch (`$1`, `$2`, `$3`).
pub(crate) struct Columns<'a> {
    pub step_ids: Vec<Uuid>,
    pub workers: Vec<&'a str>,
    pub fences: Vec<i64>,
}

pub(crate) fn columns<'a>(holders: &[&'a Holder]) -> Columns<'a> {
    Columns {
        step_ids: holders.iter().map(|h| h.step_id).collect(),
        workers: holders.iter().map(|h| h.worker.as_str()).collect(),
        fences: holders.iter().map(|h| h.fence).collect(),
    }
}

/// One result per holder of a batch, in order: `Ok` where its row was written (its step id
/// came back), [`Error::LeaseLost`] where it was not.
pub(crate) fn per_holder(holders: &[&Holder], landed: &[Uuid]) -> Vec<Result<(), Error>> {
    holders.iter().map(|h| if landed.contains(&h.step_id) { Ok(()) } else { Err(h.lost()) }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(n: u128) -> Holder {
        Holder { step_id: Uuid::from_u128(n), worker: "w".into(), fence: n as i64 }
    }

    #[test]
    fn a_holder_whose_row_did_not_come_back_lost_its_lease() {
        let (a, b) = (holder(1), holder(2));
        let results = per_holder(&[&a, &b], &[b.step_id]);
        assert!(matches!(results[0], Err(Error::LeaseLost { fence: 1, .. })));
        assert!(results[1].is_ok());
    }

    #[test]
    fn zero_rows_is_lease_lost() {
        let a = holder(7);
        assert!(matches!(expect_changed(&a, 0), Err(Error::LeaseLost { fence: 7, .. })));
        assert!(expect_changed(&a, 1).is_ok());
        assert!(matches!(expect_row::<i32>(&a, None), Err(Error::LeaseLost { .. })));
    }

    #[test]
    fn the_predicate_replaces_its_marker() {
        let sql = one("UPDATE steps s SET x = 1 WHERE {holder}");
        assert!(sql.ends_with("s.status = 'running'") && !sql.contains('{'));
        let sql = batch("SELECT 1 FROM steps s, input i WHERE {holders} AND s.attempt < 3");
        assert!(sql.contains("(s.status = 'running') IS TRUE AND s.attempt < 3"));
    }
}
