//! The scheduler's round of schedules, every [`SCHEDULE_INTERVAL`]: one bounded statement locks
//! the due schedules ([`rara_store::schedules::ScheduleRound`]), and in that transaction each
//! one's slots up to now are decided: a slot older than the catch-up window is missed; a buffered
//! slot whose previous run ended fires first; the others fire, wait or are skipped as the
//! overlap policy says ([`rara_domain::schedule::decide`]). A slot's run is planned as submit
//! plans it ([`rara_domain::schedule::plan_slot`]) and carries the slot's idempotency key, so
//! two schedulers (or a retried Lambda) make one run of it.

use std::time::Duration;

use chrono::{DateTime, Utc};
use rara_domain::schedule::{self, Calendar, Decision, Overlap, Slot};
use rara_domain::workflow::WorkflowDefinition;
use rara_operator::inputs;
use rara_store::schedules::{Advance, DueSchedule, ScheduleRound};
use rara_store::submit::Origin;

use super::{Error, Scheduler};
use crate::metrics::Counters;

/// How often a running scheduler fires the due slots of schedules (at most
/// `RARA_REAP_INTERVAL_MS`): a slot fires within this (plus its jitter) of its time, or within
/// the scheduler's invocation interval in AWS (docs/src/guide/schedules.md).
pub const SCHEDULE_INTERVAL: Duration = Duration::from_secs(1);

/// The most schedules one round locks (more wait for the next round).
pub const SCHEDULE_BATCH: u32 = 100;

/// The most slots one round decides per schedule, and the most missed slots it counts one by one
/// (after a long pause: more are counted as this many).
pub const SLOTS_PER_ROUND: usize = 100;
pub const MISSED_COUNTED: usize = 100_000;

/// Why a scheduler cancels a schedule's previous run (`cancel_previous`).
pub const CANCEL_REASON: &str = "cancelled by its schedule: the next slot came (overlap cancel_previous)";

impl Scheduler {
    /// One round of schedules. A failing round is returned and tried again at the next look;
    /// nothing of it is kept (its transaction rolls back).
    pub(super) async fn schedules(&self, counters: &mut Counters) -> Result<(), Error> {
        let mut round = self.db(self.store.begin_schedule_round(SCHEDULE_BATCH)).await?;
        if round.due.is_empty() {
            return Ok(());
        }
        for due in std::mem::take(&mut round.due) {
            let advance = self.decide(&mut round, &due).await?;
            self.db(round.advance(due.id, &advance)).await?;
            counters.slots_fired += advance.fired;
            counters.slots_skipped += advance.skipped;
            counters.slots_missed += advance.missed;
            counters.slots_failed += advance.failed;
            if advance.failed > 0 {
                tracing::warn!(schedule = due.name, error = advance.error.as_deref(), "a schedule's slot made no run");
            }
        }
        self.db(round.commit()).await?;
        Ok(())
    }

    /// The slots of `due` up to the round's clock, decided.
    async fn decide(&self, round: &mut ScheduleRound, due: &DueSchedule) -> Result<Advance, Error> {
        let now = round.now;
        let calendar = match schedule::spec_of(due.spec.cron.as_deref(), due.spec.every_ms)
            .and_then(|spec| Calendar::new(&spec, &due.spec.timezone))
        {
            Ok(calendar) => calendar,
            // Not stored by rara (create checks it): set aside for a day, and said so.
            Err(e) => return Ok(failed_spec(due, now, e.to_string())),
        };
        let overlap: Overlap = due.spec.overlap.parse().unwrap_or_default();
        let jitter = Duration::from_millis(due.spec.jitter_ms.max(0) as u64);
        let oldest = now - chrono::Duration::milliseconds(due.spec.catchup_window_ms.max(0));
        let mut firing = Firing { due, running: due.last_running, advance: Advance::default(), definition: None };
        firing.advance.buffered_slot_at = due.buffered_slot_at;
        if let Some(slot) = due.buffered_slot_at.filter(|_| !due.last_running) {
            firing.advance.buffered_slot_at = None;
            self.fire(round, &mut firing, slot).await?;
        }
        let mut slot = Some(due.next_slot_at);
        if due.next_slot_at < oldest {
            // Missed while nobody looked (downtime, a pause): counted, never fired.
            let resume = calendar.next_after(oldest - chrono::Duration::milliseconds(1));
            firing.advance.missed =
                calendar.count_between(due.next_slot_at, resume.unwrap_or(oldest), MISSED_COUNTED) as u64;
            slot = resume;
        }
        let mut decided = 0;
        while let Some(at) = slot.filter(|at| *at + jitter_of(due, *at, jitter) <= now && decided < SLOTS_PER_ROUND) {
            decided += 1;
            match schedule::decide(overlap, firing.running, firing.advance.buffered_slot_at.is_some()) {
                Decision::Fire => self.fire(round, &mut firing, at).await?,
                Decision::CancelAndFire => {
                    if let Some(previous) = firing.advance.last_run.map(|l| l.0).or(due.last_run_id) {
                        self.db(round.cancel_run(previous, CANCEL_REASON)).await?;
                    }
                    self.fire(round, &mut firing, at).await?;
                }
                Decision::Buffer => firing.advance.buffered_slot_at = Some(at),
                Decision::Skip => firing.advance.skipped += 1,
            }
            slot = calendar.next_after(at);
        }
        // No next slot (a pattern that ends): looked at again in a year.
        let next = slot.unwrap_or(now + chrono::Duration::days(366));
        firing.advance.next_slot_at = next;
        firing.advance.next_fire_at = next + jitter_of(due, next, jitter);
        Ok(firing.advance)
    }

    /// Makes the run of `slot` (or finds it, made by another scheduler); a slot whose run cannot
    /// be made (its definition gone or invalid) is counted as failed, with why.
    async fn fire(&self, round: &mut ScheduleRound, firing: &mut Firing<'_>, slot: DateTime<Utc>) -> Result<(), Error> {
        let due = firing.due;
        if firing.definition.is_none() {
            let found = match self.db(round.definition(&due.spec.workflow, due.spec.workflow_version)).await {
                Ok(found) => found,
                Err(e) if e.is_transient() => return Err(e.into()),
                Err(e) => return firing.fail(e.to_string()),
            };
            match serde_json::from_value::<WorkflowDefinition>(found.definition) {
                Ok(definition) => firing.definition = Some((definition, found.version)),
                Err(e) => return firing.fail(format!("{}@{}: {e}", found.name, found.version)),
            }
        }
        let Some((definition, version)) = &firing.definition else { return Ok(()) };
        let inputs = due.spec.inputs.as_object().cloned().unwrap_or_default();
        let slot_of = Slot { schedule_id: due.id, schedule: &due.name, inputs: &inputs, at: slot };
        let builtins = self.builtins();
        let in_process = |op: &str, v: Option<&str>| builtins.is_some_and(|b| b.in_process(op, v).is_some());
        let plan = match schedule::plan_slot(definition, &slot_of, &self.settings.core, in_process) {
            Ok(plan) => plan,
            Err(e) => return firing.fail(format!("{}@{version}: {e}", due.spec.workflow)),
        };
        let mut origin = Origin { workflow_version: Some(*version), schedule: Some((due.id, slot)), run_id: None };
        // Inputs beyond the inline bound go to the store first (a failure: the round again).
        let offload = self.inputs_offload();
        let mut plan = plan;
        let written = inputs::write(offload.as_ref(), &mut plan, &mut origin).await?;
        let submitted = self.db(round.submit(&plan, origin)).await;
        if let (Some(offload), Some(key)) = (&offload, &written)
            && !submitted.as_ref().is_ok_and(|s| s.created)
        {
            inputs::discard(offload, key).await;
        }
        let run = match submitted {
            Ok(submitted) => {
                firing.advance.fired += u64::from(submitted.created);
                submitted.run_id
            }
            Err(rara_store::Error::IdempotencyConflict { run_id, .. }) => run_id,
            Err(e) if e.is_transient() => return Err(e.into()),
            Err(e) => return firing.fail(e.to_string()),
        };
        firing.advance.last_run = Some((run, slot));
        firing.advance.error = None;
        firing.running = true;
        Ok(())
    }
}

/// One schedule's slots being decided.
struct Firing<'a> {
    due: &'a DueSchedule,
    /// Whether its latest run is going (a run fired this round is).
    running: bool,
    advance: Advance,
    /// The definition its slots run, read at the first slot that fires.
    definition: Option<(WorkflowDefinition, i32)>,
}

impl Firing<'_> {
    /// Counts the slot as failed, with why; the round goes on.
    fn fail(&mut self, error: String) -> Result<(), Error> {
        self.advance.failed += 1;
        self.advance.error = Some(error);
        Ok(())
    }
}

fn jitter_of(due: &DueSchedule, slot: DateTime<Utc>, max: Duration) -> chrono::Duration {
    chrono::Duration::from_std(schedule::jitter(due.id, slot, max)).unwrap_or_default()
}

/// A schedule whose stored spec does not read: looked at again in a day, the reason recorded.
fn failed_spec(due: &DueSchedule, now: DateTime<Utc>, error: String) -> Advance {
    let later = now + chrono::Duration::days(1);
    Advance {
        next_slot_at: due.next_slot_at,
        next_fire_at: later,
        buffered_slot_at: due.buffered_slot_at,
        failed: 1,
        error: Some(error),
        ..Advance::default()
    }
}
