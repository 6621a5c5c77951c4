//! Schedules: when a registered workflow runs by itself. The calendar ([`Calendar`]: a cron in a
//! zone, or every so long), what a slot does when the schedule's previous run is still going
//! ([`Overlap`], decided by [`decide`]), the key that makes a slot one run however many
//! schedulers fire it ([`slot_key`]), a slot's jitter ([`jitter`]), and a slot's run planned
//! ([`plan_slot`], with `{"$schedule": "/slot_time"}` in the inputs filled in).
//!
//! # Layout
//!
//! - `calendar.rs`: [`Spec`] and [`Calendar`] (croner, chrono-tz), with its tests against a
//!   table of known instants across daylight-saving changes.
//! - this file: the overlap policy, the slot's key, jitter and plan, the bounds.

mod calendar;

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};
use uuid::Uuid;

pub use calendar::{Calendar, MAX_CRON_LEN, MAX_EVERY, MIN_EVERY, Spec};

use crate::config::Config;
use crate::workflow::{self, Plan, Problem, WorkflowDefinition};

/// The longest catch-up window and jitter a schedule may have.
pub const MAX_CATCHUP_WINDOW: Duration = Duration::from_secs(366 * 86_400);
pub const MAX_JITTER: Duration = Duration::from_secs(3_600);
/// The catch-up window unless one is given: slots missed within the last hour fire.
pub const DEFAULT_CATCHUP_WINDOW: Duration = Duration::from_secs(3_600);
/// The most slots one backfill makes (a larger range is refused, with its count).
pub const MAX_BACKFILL: usize = 1_000;
/// The key of run inputs that reads the slot: `{"$schedule": "/slot_time"}`.
pub const SLOT_REFERENCE: &str = "$schedule";

/// A schedule that is not valid, at its field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct Error {
    pub field: &'static str,
    pub message: String,
}

impl Error {
    pub(crate) fn invalid(field: &'static str, message: String) -> Self {
        Error { field, message }
    }
}

/// What a slot does while the schedule's previous run is still going.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// The slot is skipped (counted as skipped): never two runs at once.
    #[default]
    Skip,
    /// The slot waits for the previous run to end, at most one slot waiting; later ones skip.
    BufferOne,
    /// The slot runs anyway.
    Allow,
    /// The previous run is cancelled, and the slot runs.
    CancelPrevious,
}

impl Overlap {
    pub const ALL: [Overlap; 4] = [Overlap::Skip, Overlap::BufferOne, Overlap::Allow, Overlap::CancelPrevious];

    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::BufferOne => "buffer_one",
            Overlap::Allow => "allow",
            Overlap::CancelPrevious => "cancel_previous",
        }
    }
}

impl FromStr for Overlap {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Overlap::ALL
            .into_iter()
            .find(|o| o.as_str() == text)
            .ok_or_else(|| format!("{text:?}: one of skip, buffer_one, allow, cancel_previous"))
    }
}

impl std::fmt::Display for Overlap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What becomes of one slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Fire,
    /// Cancel the previous run, then fire.
    CancelAndFire,
    /// Keep the slot until the previous run ends.
    Buffer,
    Skip,
}

/// The slot's fate under `overlap`, given whether the previous run is still going and whether a
/// slot already waits (`buffer_one`).
pub fn decide(overlap: Overlap, previous_running: bool, one_buffered: bool) -> Decision {
    match (overlap, previous_running) {
        (_, false) | (Overlap::Allow, true) => Decision::Fire,
        (Overlap::Skip, true) => Decision::Skip,
        (Overlap::CancelPrevious, true) => Decision::CancelAndFire,
        (Overlap::BufferOne, true) if one_buffered => Decision::Skip,
        (Overlap::BufferOne, true) => Decision::Buffer,
    }
}

/// The idempotency key of the run of `schedule`'s slot `slot`: the same for every scheduler,
/// trigger or backfill that makes it, so a slot is one run.
pub fn slot_key(schedule: Uuid, slot: DateTime<Utc>) -> String {
    format!("schedule:{schedule}:{}", slot.to_rfc3339_opts(SecondsFormat::Millis, true))
}

/// How long after `slot` it fires: the same for every scheduler, below `max` (FNV-1a of the
/// schedule and the slot).
pub fn jitter(schedule: Uuid, slot: DateTime<Utc>, max: Duration) -> Duration {
    let max_ms = max.as_millis() as u64;
    if max_ms == 0 {
        return Duration::ZERO;
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in schedule.as_bytes().iter().chain(&slot.timestamp_millis().to_le_bytes()) {
        hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
    }
    Duration::from_millis(hash % max_ms)
}

/// A schedule's slot, as its run is made.
#[derive(Debug, Clone, Copy)]
pub struct Slot<'a> {
    pub schedule_id: Uuid,
    pub schedule: &'a str,
    /// The schedule's run inputs, `{"$schedule": "/slot_time"}` not yet filled in.
    pub inputs: &'a Map<String, Value>,
    pub at: DateTime<Utc>,
}

impl Slot<'_> {
    /// What `{"$schedule": POINTER}` reads: `/slot_time` (RFC 3339, UTC) and `/schedule`.
    pub fn context(&self) -> Value {
        json!({"slot_time": self.at.to_rfc3339_opts(SecondsFormat::Secs, true), "schedule": self.schedule})
    }

    /// The inputs with each `{"$schedule": POINTER}` replaced by what it reads.
    pub fn inputs(&self) -> Result<Map<String, Value>, Problem> {
        let context = self.context();
        self.inputs
            .iter()
            .map(|(key, value)| Ok((key.clone(), fill(value, &context, &format!("inputs.{key}"))?)))
            .collect()
    }
}

fn fill(value: &Value, context: &Value, path: &str) -> Result<Value, Problem> {
    match value {
        Value::Object(object) if object.len() == 1 && object.contains_key(SLOT_REFERENCE) => {
            let found = object[SLOT_REFERENCE].as_str().and_then(|p| context.pointer(p));
            found.cloned().ok_or_else(|| Problem {
                path: path.to_owned(),
                message: format!("{SLOT_REFERENCE} reads \"/slot_time\" or \"/schedule\""),
            })
        }
        Value::Object(object) => object
            .iter()
            .map(|(k, v)| Ok((k.clone(), fill(v, context, &format!("{path}.{k}"))?)))
            .collect::<Result<Map<_, _>, _>>()
            .map(Value::Object),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| fill(v, context, &format!("{path}[{i}]")))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        other => Ok(other.clone()),
    }
}

/// The run of `slot`: `definition` planned as submit plans it, with the slot's inputs and key.
pub fn plan_slot(
    definition: &WorkflowDefinition,
    slot: &Slot<'_>,
    config: &Config,
    in_process: impl Fn(&str, Option<&str>) -> bool,
) -> Result<Plan, workflow::Error> {
    let inputs = slot.inputs().map_err(|p| workflow::Error::Invalid(vec![p]))?;
    let mut definition = definition.clone();
    definition.idempotency_key = Some(slot_key(slot.schedule_id, slot.at));
    definition.plan_for(config, &inputs, in_process)
}

/// The spec of a stored schedule: its cron, or every so many milliseconds.
pub fn spec_of(cron: Option<&str>, every_ms: Option<i64>) -> Result<Spec, Error> {
    match (cron, every_ms) {
        (Some(cron), None) => Ok(Spec::Cron(cron.to_owned())),
        (None, Some(ms)) if ms > 0 => Ok(Spec::Every(Duration::from_millis(ms as u64))),
        _ => Err(Error::invalid("cron", "a schedule has a cron or an every, one of the two".to_owned())),
    }
}

/// A duration bounded for `field`: at most `max`.
pub fn bounded(field: &'static str, value: Duration, max: Duration) -> Result<Duration, Error> {
    if value > max {
        return Err(Error::invalid(field, format!("at most {}", crate::human::duration(max))));
    }
    Ok(value)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn overlap_decides_each_slot() {
        assert_eq!(decide(Overlap::Skip, false, false), Decision::Fire);
        assert_eq!(decide(Overlap::Skip, true, false), Decision::Skip);
        assert_eq!(decide(Overlap::Allow, true, false), Decision::Fire);
        assert_eq!(decide(Overlap::CancelPrevious, true, false), Decision::CancelAndFire);
        assert_eq!(decide(Overlap::BufferOne, true, false), Decision::Buffer);
        assert_eq!(decide(Overlap::BufferOne, true, true), Decision::Skip);
        assert_eq!("buffer_one".parse::<Overlap>(), Ok(Overlap::BufferOne));
        assert!("sometimes".parse::<Overlap>().is_err());
    }

    #[test]
    fn a_slot_fills_its_time_into_the_inputs_and_keys_its_run() {
        let at = DateTime::parse_from_rfc3339("2026-12-06T02:00:00Z").unwrap().with_timezone(&Utc);
        let inputs = json!({"night": {"$schedule": "/slot_time"}, "tags": [{"$schedule": "/schedule"}], "n": 3});
        let slot = Slot { schedule_id: Uuid::nil(), schedule: "nightly", inputs: inputs.as_object().unwrap(), at };
        assert_eq!(
            Value::Object(slot.inputs().unwrap()),
            json!({"night": "2026-12-06T02:00:00Z", "tags": ["nightly"], "n": 3})
        );
        let bad = json!({"night": {"$schedule": "/nope"}});
        let slot = Slot { inputs: bad.as_object().unwrap(), ..slot };
        assert_eq!(slot.inputs().unwrap_err().path, "inputs.night");
        assert_eq!(slot_key(Uuid::nil(), at), "schedule:00000000-0000-0000-0000-000000000000:2026-12-06T02:00:00.000Z");
    }

    #[test]
    fn jitter_is_the_same_for_every_scheduler_and_below_its_bound() {
        let at = Utc::now();
        let id = Uuid::now_v7();
        let max = Duration::from_secs(60);
        assert_eq!(jitter(id, at, max), jitter(id, at, max));
        assert!(jitter(id, at, max) < max);
        assert_eq!(jitter(id, at, Duration::ZERO), Duration::ZERO);
        let spread: std::collections::HashSet<_> =
            (0..20).map(|i| jitter(id, at + chrono::Duration::seconds(i), max)).collect();
        assert!(spread.len() > 10, "jitter spreads slots: {spread:?}");
    }
}
