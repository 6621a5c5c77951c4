//! The rules the runners' counters must satisfy: each runner's alone, against the attempt
//! history, and the message balance (DESIGN.md "Lease ownership"; the parent's docs say what
//! the counters can and cannot prove).

use super::step::AttemptRow;
use super::{Counters, Ledger, MAX_BATCH, Report, Violation};

pub(super) fn check_counters(attempts: &[AttemptRow], ledger: &Ledger, report: &mut Report, v: &mut Vec<Violation>) {
    let mut total = Counters::default();
    for (i, c) in ledger.runners.iter().enumerate() {
        total += *c;
        check_runner(i, c, v);
    }
    check_against_attempts(attempts, ledger, &total, v);
    check_balance(ledger, total, report, v);
}

/// One runner's counters agree with themselves: fates, acknowledgements, claims, sends.
fn check_runner(i: usize, c: &Counters, v: &mut Vec<Violation>) {
    // Every received step (one per message, or several: `packed`) gets exactly one fate.
    // The counters do not name every fate (a claim or DLQ failure only shows in
    // `unsettled`), so this is a pair of bounds.
    let steps = c.received + c.packed;
    let fated = c.claimed + c.stale + c.held + c.dead_lettered;
    if steps < fated || steps > c.claimed + c.stale + c.dead_lettered + c.unsettled + c.moved {
        v.push(Violation {
            rule: "every received message gets one fate",
            detail: format!("runner {i}: received {steps} steps but {c:?}"),
        });
    }
    // A message is deleted only for a settled fate: an outcome recorded (success, failure
    // for good, retry in Postgres, a map expanded), a step given back by a stopping runner
    // (released in Postgres, fenced), a lost lease, a stale verdict, a dead letter, or a
    // step of a packed message moved into a message of its own. Counted per step: a
    // packed message is deleted when each of its steps is settled. Anything else (a panic,
    // an outcome that did not land) comes back.
    let acknowledged = steps.saturating_sub(c.unsettled);
    // `released` also counts a scheduler's leases given back after failed sends; only an
    // executor (a runner that receives messages) gives back steps it claimed.
    let released = if c.received > 0 { c.released } else { 0 };
    let settled = c.succeeded
        + c.failed
        + c.deferred
        + c.expanded
        + released
        + c.lease_lost
        + c.stale
        + c.dead_lettered
        + c.moved;
    if acknowledged != settled {
        v.push(Violation {
            rule: "a message is acknowledged only for a settled fate",
            detail: format!("runner {i}: acknowledged {acknowledged} but settled {settled} ({c:?})"),
        });
    }
    // Every claim ends in at most one recorded outcome (or lease lost, or comes back).
    let ended = c.succeeded + c.failed + c.retried + c.expanded + released + c.lease_lost;
    // (A claimed step moved into a message of its own was retried or parked.)
    if ended > c.claimed || c.claimed > ended + c.unsettled + c.moved {
        v.push(Violation {
            rule: "every claim ends once",
            detail: format!("runner {i}: claimed {} but ended {ended} ({c:?})", c.claimed),
        });
    }
    // A scheduler sends at most a message per step it sent; an executor one per step moved.
    if c.sent > c.leased || c.messages > c.sent + c.moved {
        v.push(Violation {
            rule: "a message is sent per lease",
            detail: format!(
                "runner {i}: sent {} steps and moved {} in {} messages, leased {}",
                c.sent, c.moved, c.messages, c.leased
            ),
        });
    }
}

fn check_against_attempts(attempts: &[AttemptRow], ledger: &Ledger, total: &Counters, v: &mut Vec<Violation>) {
    // Counters against the database: each claim opens one attempt row (a re-attach to a
    // detached attempt opens none), each recorded success closes one. Runners killed before
    // exiting claimed (and recorded) without counting, and so did calls whose answers a
    // silent Postgres peer swallowed.
    // (Skipped when no runner counters were given: a history written without runners.)
    let rows = attempts.len() as u64;
    let successes = attempts.iter().filter(|a| a.outcome == "succeeded").count() as u64;
    let exact = ledger.killed_executors == 0 && ledger.postgres_silences == 0;
    let opened = total.claimed.saturating_sub(total.reattached);
    for (what, db, counted) in [("claims", rows, opened), ("successes", successes, total.succeeded)] {
        if !ledger.runners.is_empty() && ((exact && db != counted) || db < counted) {
            v.push(Violation {
                rule: "runner counters match the attempt history",
                detail: format!("{what}: {db} in step_attempts, {counted} counted by the runners"),
            });
        }
    }
}

/// The report's message figures, and the balance within what the injected faults explain.
fn check_balance(ledger: &Ledger, total: Counters, report: &mut Report, v: &mut Vec<Violation>) {
    report.counters = total;
    report.injected = ledger.injected;
    report.removed_by_test = ledger.removed_by_test;
    report.left_on_queue = ledger.left_on_queue;
    report.on_dlq = ledger.on_dlq;
    report.acknowledged = total.received.saturating_sub(total.returned);
    let redriven = ledger.on_dlq as i64 - total.dead_lettered as i64;
    let balance = (total.messages + ledger.injected) as i64
        - ledger.removed_by_test as i64
        - report.acknowledged as i64
        - ledger.left_on_queue as i64
        - redriven;
    report.message_balance = balance;
    let low = if ledger.lost_schedulers > 0 { i64::MIN } else { -(ledger.pauses as i64) * MAX_BATCH };
    let high = if ledger.killed_executors > 0 { i64::MAX } else { 0 };
    report.messages_unaccounted = if balance < low {
        balance - low
    } else if balance > high {
        balance - high
    } else {
        0
    };
    if report.messages_unaccounted != 0 {
        v.push(Violation {
            rule: "every message is accounted for",
            detail: format!(
                "sent {} + injected {} - removed by the test {} - acknowledged {} - left on the queue {} - redriven {redriven} = {balance}, allowed {low}..={} ({} killed executors, {} pauses)",
                total.messages,
                ledger.injected,
                ledger.removed_by_test,
                report.acknowledged,
                ledger.left_on_queue,
                if high == i64::MAX { "∞".to_string() } else { high.to_string() },
                ledger.killed_executors,
                ledger.pauses
            ),
        });
    }
}
