//! `rara workflow register|list|show` and `rara submit --workflow`: a changed file registers a
//! new version, the same file the same version; a submission runs the newest version (or the one
//! named) and `rara status` shows name@version.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;

const V1: &str = "name: nightly\ninputs: {day: {type: string}}\nsteps: [{name: a, operation: noop}]\n";
const V2: &str = "name: nightly\ninputs: {day: {type: string}}\nsteps:\n  - {name: a, operation: noop}\n  - {name: b, operation: noop, depends_on: [a]}\n";

#[test]
fn submit_workflow_runs_the_newest_registered_version() {
    let db = ScratchDb::new();
    let dir = tempdir();
    assert!(db.rara(&["migrate"]).status.success());
    let file = write(&dir, "nightly.yaml", V1);
    assert_eq!(ok(&db.rara(&["workflow", "register", &file])).trim(), "registered nightly@1");
    assert_eq!(ok(&db.rara(&["workflow", "register", &file])).trim(), "unchanged, already nightly@1");
    let file = write(&dir, "nightly.yaml", V2);
    assert_eq!(ok(&db.rara(&["workflow", "register", &file])).trim(), "registered nightly@2");
    let list = ok(&db.rara(&["workflow", "list"]));
    assert!(list.contains("nightly") && list.contains(" 2 "), "{list}");
    let shown = ok(&db.rara(&["workflow", "show", "nightly@1"]));
    assert!(shown.starts_with("nightly@1") && !shown.contains("\"b\""), "{shown}");

    let newest = ok(&db.rara(&["submit", "--workflow", "nightly", "--input", "day=d1"]));
    let status = ok(&db.rara(&["status", newest.trim()]));
    assert!(status.contains("nightly@2"), "{status}");
    let pinned = ok(&db.rara(&["submit", "--workflow", "nightly@1", "--input", "day=d1"]));
    let status = ok(&db.rara(&["status", pinned.trim(), "--json"]));
    let run: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!((run["workflow_version"].clone(), run["steps"].as_array().unwrap().len()), (1.into(), 1));

    let missing = db.rara(&["submit", "--workflow", "nightly@7"]);
    assert_eq!(missing.status.code(), Some(3), "{}", stderr(&missing));
    let invalid = write(&dir, "bad.yaml", "name: bad\nsteps: [{name: a, operation: noop, depends_on: [zz]}]\n");
    let refused = db.rara(&["workflow", "register", &invalid]);
    assert_eq!(refused.status.code(), Some(4), "{}", stderr(&refused));
    // Submitting a file works as before and records no version.
    let from_file = ok(&db.rara(&["submit", &file, "--input", "day=d1"]));
    let status = ok(&db.rara(&["status", from_file.trim()]));
    assert!(status.contains("  nightly  "), "{status}");
}
