//! `rara prune`: a dry run counts and changes nothing, the real prune deletes finished runs
//! past the duration and nothing else, a pruned run is not found, a bad duration is a usage
//! error.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;

fn submit(db: &ScratchDb, file: &str) -> String {
    let out = db.rara(&["submit", file]);
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out).trim().to_owned()
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).expect("--json prints JSON")
}

#[test]
fn prune_deletes_finished_runs_past_the_duration_and_a_dry_run_only_counts() {
    let db = ScratchDb::new();
    assert!(db.rara(&["migrate"]).status.success());
    let dir = tempdir();
    let file =
        write(&dir, "wf.yaml", "name: p\nsteps:\n  - {name: a, operation: noop}\n  - {name: b, operation: noop}\n");
    let (first, second, running) = (submit(&db, &file), submit(&db, &file), submit(&db, &file));
    for run in [&first, &second] {
        assert!(db.rara(&["cancel", run]).status.success());
    }

    let none = json(&db.rara(&["prune", "--older-than", "1h", "--dry-run", "--json"]));
    assert_eq!((none["runs"].as_u64(), none["dry_run"].as_bool()), (Some(0), Some(true)), "{none}");
    let would = db.rara(&["prune", "--older-than", "0s", "--dry-run"]);
    assert!(would.status.success(), "{}", stderr(&would));
    assert!(stdout(&would).contains("would delete 2 runs (4 steps)"), "{}", stdout(&would));
    assert!(db.rara(&["status", &first]).status.success(), "a dry run deletes nothing");
    let again = json(&db.rara(&["prune", "--older-than", "0s", "--dry-run", "--json"]));
    assert_eq!((again["runs"].as_u64(), again["steps"].as_u64()), (Some(2), Some(4)), "{again}");

    let pruned = db.rara(&["prune", "--older-than", "0s", "--batch-size", "1"]);
    assert!(pruned.status.success(), "{}", stderr(&pruned));
    assert!(stdout(&pruned).contains("deleted 2 runs (4 steps)"), "{}", stdout(&pruned));
    assert!(stderr(&pruned).contains("2 runs so far"), "progress per batch: {}", stderr(&pruned));

    for run in [&first, &second] {
        let status = db.rara(&["status", run]);
        assert_eq!(status.status.code(), Some(3), "a pruned run is not found: {}", stderr(&status));
    }
    assert!(db.rara(&["status", &running]).status.success(), "a running run stays");
    let nothing = json(&db.rara(&["prune", "--older-than", "0s", "--json"]));
    assert_eq!((nothing["runs"].as_u64(), nothing["dry_run"].as_bool()), (Some(0), Some(false)), "{nothing}");
}

#[test]
fn a_bad_duration_is_a_usage_error_that_says_what_a_duration_is() {
    let db = ScratchDb::new();
    for bad in ["7", "7w", "1.5h", "-1d", "soon"] {
        let out = db.rara(&["prune", &format!("--older-than={bad}")]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr(&out));
        assert!(stderr(&out).contains("expected a whole number and a unit"), "{bad}: {}", stderr(&out));
    }
    let missing = db.rara(&["prune"]);
    assert_eq!(missing.status.code(), Some(2), "--older-than is required");
}

#[test]
fn prune_archive_keeps_a_copy_and_the_run_is_gone_from_status() {
    let db = ScratchDb::new();
    assert!(db.rara(&["migrate"]).status.success());
    let dir = tempdir();
    let file = write(&dir, "wf.yaml", "name: p\nsteps:\n  - {name: a, operation: noop}\n");
    let run = submit(&db, &file);
    assert!(db.rara(&["cancel", &run]).status.success());
    let out = json(&db.rara(&["prune", "--older-than", "0s", "--archive", "--json"]));
    assert_eq!((out["runs"].as_u64(), out["archived"].as_bool()), (Some(1), Some(true)), "{out}");
    assert_eq!(db.rara(&["status", &run]).status.code(), Some(3));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let copies: i64 = runtime.block_on(async {
        let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
        sqlx::query_scalar("SELECT count(*) FROM archived_workflow_runs WHERE id = $1::uuid")
            .bind(&run)
            .fetch_one(&pool)
            .await
            .unwrap()
    });
    assert_eq!(copies, 1, "the run is in the archive");
}
