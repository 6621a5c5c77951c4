//! `rara schedule`: create (checked: a bad cron, an unknown zone, a missing workflow), list,
//! pause, resume, trigger, delete; a backfill of 48 hourly slots makes 48 runs with the right
//! slot times, the same backfill again makes none, and a range above the limit is refused with
//! its count.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;

const NIGHTLY: &str = "name: nightly\ninputs: {night: {type: string}}\nsteps: [{name: index, operation: noop}]\n";

#[test]
fn a_schedule_is_created_listed_paused_triggered_and_backfilled_once() {
    let db = ScratchDb::new();
    let dir = tempdir();
    assert!(db.rara(&["migrate"]).status.success());
    ok(&db.rara(&["workflow", "register", &write(&dir, "nightly.yaml", NIGHTLY)]));
    let create = |extra: &[&str]| {
        let mut args = vec!["schedule", "create", "nightly-index", "--workflow", "nightly"];
        args.extend_from_slice(extra);
        db.rara(&args)
    };
    let bad = create(&["--cron", "0 2 * *", "--input-json", r#"night={"$schedule": "/slot_time"}"#]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("cron"), "{}", stderr(&bad));
    let zone = create(&["--cron", "0 2 * * *", "--timezone", "Mars/Olympus"]);
    assert_eq!(zone.status.code(), Some(2), "{}", stderr(&zone));
    let unknown = db.rara(&["schedule", "create", "x", "--workflow", "nope", "--every", "30s"]);
    assert_eq!(unknown.status.code(), Some(3), "{}", stderr(&unknown));
    let args = [
        "--cron",
        "0 * * * *",
        "--timezone",
        "Europe/Berlin",
        "--input-json",
        r#"night={"$schedule": "/slot_time"}"#,
        "--overlap",
        "skip",
        "--catchup-window",
        "6h",
        "--jitter",
        "60s",
    ];
    assert!(ok(&create(&args)).starts_with("created schedule nightly-index"));
    assert_eq!(create(&args).status.code(), Some(1), "the name is taken");

    let list = ok(&db.rara(&["schedule", "list"]));
    assert!(
        list.contains("nightly-index") && list.contains("nightly@latest") && list.contains("Europe/Berlin"),
        "{list}"
    );
    ok(&db.rara(&["schedule", "pause", "nightly-index"]));
    let listed: serde_json::Value = serde_json::from_str(&ok(&db.rara(&["schedule", "list", "--json"]))).unwrap();
    assert_eq!(listed[0]["paused"], true);
    ok(&db.rara(&["schedule", "resume", "nightly-index"]));
    let run = ok(&db.rara(&["schedule", "trigger", "nightly-index"]));
    let status = ok(&db.rara(&["status", run.trim()]));
    assert!(status.contains("nightly@1"), "{status}");

    let backfill =
        ["schedule", "backfill", "nightly-index", "--from", "2026-12-01T00:00Z", "--to", "2026-12-03T00:00Z"];
    assert_eq!(ok(&db.rara(&backfill)).trim(), "backfilled 48 slots of nightly-index: 48 new runs");
    assert_eq!(ok(&db.rara(&backfill)).trim(), "backfilled 48 slots of nightly-index: 0 new runs");
    let nights = db.psql_rows(
        "SELECT inputs->>'night' FROM workflow_runs WHERE schedule_slot < '2026-12-04' ORDER BY schedule_slot",
    );
    assert_eq!(nights.len(), 48);
    assert_eq!((nights[0].as_str(), nights[47].as_str()), ("2026-12-01T00:00:00Z", "2026-12-02T23:00:00Z"));
    let huge = db.rara(&["schedule", "backfill", "nightly-index", "--from", "2026-01-01", "--to", "2026-12-01"]);
    assert_eq!(huge.status.code(), Some(2), "{}", stderr(&huge));
    assert!(stderr(&huge).contains("holds 8016 slots; a backfill makes at most 1000"), "{}", stderr(&huge));

    ok(&db.rara(&["schedule", "delete", "nightly-index"]));
    assert_eq!(db.rara(&["schedule", "pause", "nightly-index"]).status.code(), Some(3));
}
