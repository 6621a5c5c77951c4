//! The calendar against a table of known instants, worked out by hand from the zones' rules
//! (tzdata: Europe/Berlin changes at 01:00 UTC on the last Sunday of March and October;
//! America/New_York at 02:00 local on the second Sunday of March and the first of November).
#![allow(clippy::unwrap_used)]

use chrono::{DateTime, Utc};

use super::*;

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
}

/// The next `n` slots after `from`, as RFC 3339 in UTC.
fn next(cron: &str, zone: &str, from: &str, n: usize) -> Vec<String> {
    let calendar = Calendar::new(&Spec::Cron(cron.into()), zone).unwrap();
    let mut at = utc(from);
    (0..n)
        .map(|_| {
            at = calendar.next_after(at).unwrap();
            at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        })
        .collect()
}

#[test]
fn berlin_spring_forward_fires_a_skipped_time_at_the_first_instant_after_the_jump() {
    // 2026-03-29: 02:00 CET becomes 03:00 CEST; 02:30 does not exist that day.
    assert_eq!(
        next("30 2 * * *", "Europe/Berlin", "2026-03-27T12:00:00Z", 3),
        ["2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"]
    );
}

#[test]
fn berlin_fall_back_fires_a_repeated_time_once() {
    // 2026-10-25: 03:00 CEST becomes 02:00 CET; 02:30 happens twice (00:30Z and 01:30Z).
    assert_eq!(
        next("30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", 3),
        ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z", "2026-10-27T01:30:00Z"]
    );
}

#[test]
fn an_hourly_pattern_fires_on_every_real_hour_across_both_changes() {
    let hours = |from: &str| next("0 * * * *", "Europe/Berlin", from, 4);
    assert_eq!(
        hours("2026-03-28T23:30:00Z"),
        ["2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z", "2026-03-29T03:00:00Z"]
    );
    assert_eq!(
        hours("2026-10-24T23:30:00Z"),
        ["2026-10-25T00:00:00Z", "2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z", "2026-10-25T03:00:00Z"]
    );
}

#[test]
fn new_york_changes_behave_alike() {
    // 2026-03-08: 02:00 EST becomes 03:00 EDT.
    assert_eq!(
        next("30 2 * * *", "America/New_York", "2026-03-07T00:00:00Z", 3),
        ["2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"]
    );
    // 2026-11-01: 02:00 EDT becomes 01:00 EST; 01:30 happens twice (05:30Z and 06:30Z).
    assert_eq!(
        next("30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z", 3),
        ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z", "2026-11-03T06:30:00Z"]
    );
}

#[test]
fn names_ranges_lists_and_steps() {
    // 09:00 and 13:00 on weekdays of the first quarter, in UTC: Friday 2027-01-01 then Monday.
    assert_eq!(
        next("0 9-17/4 * JAN-MAR MON-FRI", "UTC", "2026-12-31T23:00:00Z", 5),
        [
            "2027-01-01T09:00:00Z",
            "2027-01-01T13:00:00Z",
            "2027-01-01T17:00:00Z",
            "2027-01-04T09:00:00Z",
            "2027-01-04T13:00:00Z"
        ]
    );
    assert_eq!(
        next("15,45 0 1 * *", "UTC", "2026-12-01T00:20:00Z", 2),
        ["2026-12-01T00:45:00Z", "2027-01-01T00:15:00Z"]
    );
}

#[test]
fn every_counts_from_the_epoch_whoever_asks() {
    let calendar = Calendar::new(&Spec::Every(Duration::from_secs(2)), "UTC").unwrap();
    assert_eq!(calendar.next_after(utc("2026-12-06T10:00:00.300Z")), Some(utc("2026-12-06T10:00:02Z")));
    assert_eq!(calendar.next_after(utc("2026-12-06T10:00:02Z")), Some(utc("2026-12-06T10:00:04Z")));
    let hourly = Calendar::new(&Spec::Every(Duration::from_secs(3600)), "UTC").unwrap();
    let slots = hourly.slots_between(utc("2026-12-01T00:00:00Z"), utc("2026-12-03T00:00:00Z"), 100).unwrap();
    assert_eq!((slots.len(), slots[0], slots[47]), (48, utc("2026-12-01T00:00:00Z"), utc("2026-12-02T23:00:00Z")));
    assert_eq!(hourly.slots_between(utc("2026-12-01T00:00:00Z"), utc("2026-12-03T00:00:00Z"), 47), None);
    assert_eq!(hourly.count_between(utc("2026-12-01T00:00:00Z"), utc("2026-12-03T00:00:00Z"), 1000), 48);
    assert_eq!(hourly.count_between(utc("2026-12-01T00:30:00Z"), utc("2026-12-03T00:00:01Z"), 1000), 48);
    assert_eq!(hourly.count_between(utc("2026-12-01T00:00:00Z"), utc("2026-12-03T00:00:00Z"), 10), 10);
    let cron = Calendar::new(&Spec::Cron("0 * * * *".into()), "UTC").unwrap();
    assert_eq!(cron.count_between(utc("2026-12-01T00:30:00Z"), utc("2026-12-03T00:00:01Z"), 1000), 48);
}

#[test]
fn bad_specs_are_refused_with_their_field() {
    let refused = |spec: Spec, zone: &str| Calendar::new(&spec, zone).unwrap_err().to_string();
    assert!(refused(Spec::Cron("0 2 * *".into()), "UTC").starts_with("cron:"));
    assert!(refused(Spec::Cron("0 0 2 * * *".into()), "UTC").starts_with("cron:"), "no seconds field");
    assert!(refused(Spec::Cron("61 * * * *".into()), "UTC").starts_with("cron:"));
    assert!(refused(Spec::Cron("0 0 30 2 *".into()), "UTC").starts_with("cron:"), "never");
    assert!(refused(Spec::Cron("0 2 * * *".into()), "Mars/Olympus").starts_with("timezone:"));
    assert!(refused(Spec::Every(Duration::from_millis(500)), "UTC").starts_with("every:"));
}
