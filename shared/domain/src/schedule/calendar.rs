//! When a schedule's slots are: a five-field cron in an IANA time zone, or every fixed duration.
//!
//! A cron is read by [`croner`] on the zone's wall clock, with its daylight-saving rules (the
//! Open Cron Pattern Specification's): a fixed time that does not exist that day (the clock
//! jumps over it) fires at the first instant after the jump; a fixed time the clock passes twice
//! fires once, at its first pass; a pattern with a wildcard hour (`*/15 * * * *`) fires on each
//! real instant that matches, so it neither doubles nor stops across a change. `every` slots are
//! multiples of the duration since the Unix epoch, the same for every scheduler whenever it
//! starts, and have no zone.

use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use super::Error;

/// The shortest and the longest `every`.
pub const MIN_EVERY: Duration = Duration::from_secs(1);
pub const MAX_EVERY: Duration = Duration::from_secs(366 * 86_400);

/// The longest cron text.
pub const MAX_CRON_LEN: usize = 200;

/// How a schedule's slots come.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
    /// Five fields: minute, hour, day of month, month (`1-12`, `JAN-DEC`), day of week (`0-7`,
    /// `SUN-SAT`), with lists, ranges and steps.
    Cron(String),
    /// Every so long, from the Unix epoch.
    Every(Duration),
}

/// A [`Spec`] in a zone, ready to say when its slots are.
#[derive(Debug, Clone)]
pub struct Calendar {
    kind: Kind,
    zone: Tz,
}

#[derive(Debug, Clone)]
enum Kind {
    Cron(Box<Cron>),
    /// Milliseconds.
    Every(i64),
}

impl Calendar {
    /// The calendar of `spec` in the IANA zone `timezone` (`UTC`, `Europe/Berlin`).
    pub fn new(spec: &Spec, timezone: &str) -> Result<Calendar, Error> {
        let zone: Tz = timezone.parse().map_err(|_| {
            Error::invalid("timezone", format!("{timezone:?} is not an IANA time zone (`UTC`, `Europe/Berlin`)"))
        })?;
        let kind = match spec {
            Spec::Cron(text) => Kind::Cron(Box::new(parse_cron(text)?)),
            Spec::Every(every) => {
                if !(MIN_EVERY..=MAX_EVERY).contains(every) {
                    return Err(Error::invalid("every", "from 1 s to 366 days".to_owned()));
                }
                Kind::Every(every.as_millis() as i64)
            }
        };
        let calendar = Calendar { kind, zone };
        if calendar.next_after(DateTime::UNIX_EPOCH).is_none() {
            return Err(Error::invalid("cron", "the pattern never matches a date".to_owned()));
        }
        Ok(calendar)
    }

    /// The first slot strictly after `after`; `None` when there is none (a pattern that matches
    /// no date within croner's search).
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match &self.kind {
            Kind::Every(every) => {
                let next = (after.timestamp_millis().div_euclid(*every) + 1).checked_mul(*every)?;
                DateTime::from_timestamp_millis(next)
            }
            Kind::Cron(cron) => {
                let local = after.with_timezone(&self.zone);
                cron.find_next_occurrence(&local, false).ok().map(|t| t.with_timezone(&Utc))
            }
        }
    }

    /// How many slots are in `[from, to)`, counted up to `limit` (`every`: exactly, at once).
    pub fn count_between(&self, from: DateTime<Utc>, to: DateTime<Utc>, limit: usize) -> usize {
        match &self.kind {
            Kind::Every(every) => {
                let first = (from.timestamp_millis() + every - 1).div_euclid(*every);
                let end = (to.timestamp_millis() + every - 1).div_euclid(*every);
                usize::try_from(end - first).unwrap_or(0).min(limit)
            }
            Kind::Cron(_) => self.slots_between(from, to, limit).map_or(limit, |slots| slots.len()),
        }
    }

    /// The slots in `[from, to)`, at most `limit`; `None` when there are more.
    pub fn slots_between(&self, from: DateTime<Utc>, to: DateTime<Utc>, limit: usize) -> Option<Vec<DateTime<Utc>>> {
        let mut slots = Vec::new();
        let mut cursor = self.next_after(from - chrono::Duration::milliseconds(1));
        while let Some(slot) = cursor.filter(|s| *s < to) {
            if slots.len() == limit {
                return None;
            }
            slots.push(slot);
            cursor = self.next_after(slot);
        }
        Some(slots)
    }
}

/// Five fields, no seconds, no year.
fn parse_cron(text: &str) -> Result<Cron, Error> {
    let fields = text.split_whitespace().count();
    if text.len() > MAX_CRON_LEN || fields != 5 {
        return Err(Error::invalid(
            "cron",
            format!(
                "{text:?} is not five fields (minute hour day-of-month month day-of-week), at most {MAX_CRON_LEN} characters"
            ),
        ));
    }
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(text)
        .map_err(|e| Error::invalid("cron", format!("{text:?}: {e}")))
}

#[cfg(test)]
#[path = "calendar_tests.rs"]
mod tests;
