//! Bounded history (`rara_store::retention`): finished runs past the retention are deleted
//! with everything under them, a bounded batch at a time, skipping what another transaction
//! holds; running and recent runs stay.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use rara_domain::executor::Artifact;
use rara_store::retention::{Prune, Pruned};
use rara_store::{Error, Store};
use sqlx::PgPool;
use uuid::Uuid;

const DAY: Duration = Duration::from_secs(86_400);

/// Moves a finished run's `finished_at` `days` into the past.
async fn finished_days_ago(pool: &PgPool, run_id: Uuid, days: i32) {
    let moved = sqlx::query(
        "UPDATE workflow_runs SET finished_at = now() - make_interval(days => $2) WHERE id = $1 AND finished_at IS NOT NULL",
    )
    .bind(run_id)
    .bind(days)
    .execute(pool)
    .await
    .unwrap();
    assert_eq!(moved.rows_affected(), 1, "run {run_id} is finished");
}

/// A cancelled run of `n` steps that finished `days` ago.
async fn cancelled_run(store: &Store, pool: &PgPool, n: usize, days: i32) -> Uuid {
    let run_id = store.submit(&flat_plan(n)).await.unwrap().run_id;
    store.cancel_run(run_id, "test").await.unwrap();
    finished_days_ago(pool, run_id, days).await;
    run_id
}

/// A succeeded run `a -> b` with a dependency, two attempts and an artifact, finished `days` ago.
async fn succeeded_run(store: &Store, pool: &PgPool, days: i32) -> Uuid {
    let run_id = store
        .submit(&plan(
            "name: done\nsteps:\n  - {name: a, operation: noop}\n  - {name: b, operation: noop, depends_on: [a]}\n",
        ))
        .await
        .unwrap()
        .run_id;
    for name in ["a", "b"] {
        let leased = lease_named(store, pool, run_id, name).await;
        let claimed = claim_one(store, "w", &leased).await;
        let artifact = Artifact {
            name: format!("{name}-report"),
            uri: "s3://bucket/report".into(),
            media_type: None,
            size_bytes: None,
            digest: None,
        };
        store.artifact(&claimed.holder, &artifact).await.unwrap();
        store.succeed(&[(claimed.holder, serde_json::json!({}))]).await.unwrap().remove(0).unwrap();
    }
    assert_eq!(run_status(pool, run_id).await, "succeeded");
    finished_days_ago(pool, run_id, days).await;
    run_id
}

async fn rows(pool: &PgPool, table: &str, step_ids: &[Uuid]) -> i64 {
    let column = if table == "step_dependencies" { "step_id = ANY($1) OR depends_on" } else { "step_id" };
    sqlx::query_scalar(&format!("SELECT count(*) FROM {table} WHERE {column} = ANY($1)"))
        .bind(step_ids)
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn step_ids(pool: &PgPool, run_id: Uuid) -> Vec<Uuid> {
    sqlx::query_scalar("SELECT id FROM steps WHERE run_id = $1").bind(run_id).fetch_all(pool).await.unwrap()
}

async fn run_exists(store: &Store, run_id: Uuid) -> bool {
    match store.run(run_id).await {
        Ok(_) => true,
        Err(Error::RunNotFound(_)) => false,
        Err(e) => panic!("{e}"),
    }
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn old_finished_runs_go_with_everything_under_them_and_the_rest_stays(pool: PgPool) {
    let store = Store::new(pool.clone());
    let old = succeeded_run(&store, &pool, 40).await;
    let old_steps = step_ids(&pool, old).await;
    for table in ["step_names", "step_dependencies", "step_attempts", "artifacts"] {
        assert!(rows(&pool, table, &old_steps).await > 0, "the old run has {table}");
    }
    let recent = succeeded_run(&store, &pool, 10).await;
    let old_cancelled = cancelled_run(&store, &pool, 3, 31).await;
    // A run still running, submitted long ago: never pruned, however old.
    let running = store.submit(&flat_plan(2)).await.unwrap().run_id;
    sqlx::query("UPDATE workflow_runs SET created_at = now() - interval '400 days' WHERE id = $1")
        .bind(running)
        .execute(&pool)
        .await
        .unwrap();

    assert_eq!(store.prunable(30 * DAY).await.unwrap(), Pruned { runs: 2, steps: 5 }, "the dry run counts");
    assert!(run_exists(&store, old).await, "counting deletes nothing");

    let pruned = store.prune_finished(30 * DAY, 500).await.unwrap();
    assert_eq!(pruned, Pruned { runs: 2, steps: 5 });
    assert!(!run_exists(&store, old).await && !run_exists(&store, old_cancelled).await);
    assert!(step_ids(&pool, old).await.is_empty(), "its steps are gone");
    for table in ["step_names", "step_dependencies", "step_attempts", "artifacts"] {
        assert_eq!(rows(&pool, table, &old_steps).await, 0, "its {table} are gone");
    }
    assert!(run_exists(&store, recent).await, "a run finished 10 days ago stays");
    assert!(run_exists(&store, running).await, "a running run stays");
    assert_eq!(rows(&pool, "step_attempts", &step_ids(&pool, recent).await).await, 2, "with its history");
    assert_eq!(store.prune_finished(30 * DAY, 500).await.unwrap(), Pruned::default(), "nothing left to prune");

    // A shorter retention reaches the recent run; a zero one every finished run.
    assert_eq!(store.prune_finished(Duration::ZERO, 500).await.unwrap().runs, 1);
    assert!(run_exists(&store, running).await);
}

/// A run cancelled while its step waited: its wait goes with it (migration 000035's statement
/// trigger, where a foreign key's cascade did it before).
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_pruned_run_takes_its_waits_with_it(pool: PgPool) {
    let store = Store::new(pool.clone());
    let run_id =
        store.submit(&plan("name: gate\nsteps:\n  - {name: gate, wait: {signal: go}}\n")).await.unwrap().run_id;
    store.wait_round(100).await.unwrap();
    let steps = step_ids(&pool, run_id).await;
    assert_eq!(rows(&pool, "waits", &steps).await, 1, "the step waits");
    store.cancel_run(run_id, "test").await.unwrap();
    finished_days_ago(&pool, run_id, 40).await;

    assert_eq!(store.prune_finished(30 * DAY, 500).await.unwrap(), Pruned { runs: 1, steps: 1 });
    assert_eq!(rows(&pool, "waits", &steps).await, 0, "its wait is gone");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_batch_deletes_at_most_its_limit_oldest_first(pool: PgPool) {
    let store = Store::new(pool.clone());
    let oldest = cancelled_run(&store, &pool, 1, 50).await;
    let middle = cancelled_run(&store, &pool, 1, 45).await;
    let youngest = cancelled_run(&store, &pool, 1, 40).await;

    assert_eq!(store.prune_finished(30 * DAY, 2).await.unwrap().runs, 2);
    assert!(!run_exists(&store, oldest).await && !run_exists(&store, middle).await, "the oldest go first");
    assert!(run_exists(&store, youngest).await);
    assert_eq!(store.prune_finished(30 * DAY, 2).await.unwrap().runs, 1);
    assert!(!run_exists(&store, youngest).await);
}

/// A run another transaction holds (here a late update of its row, as a finishing step's
/// counter update would be) is skipped at once, not waited for; the next batch takes it.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_run_another_transaction_holds_is_skipped_not_waited_for(pool: PgPool) {
    let store = Store::new(pool.clone());
    let held = cancelled_run(&store, &pool, 2, 40).await;
    let free = cancelled_run(&store, &pool, 2, 40).await;

    let mut holder = pool.begin().await.unwrap();
    sqlx::query("UPDATE workflow_runs SET updated_at = now() WHERE id = $1")
        .bind(held)
        .execute(&mut *holder)
        .await
        .unwrap();
    let pruned = tokio::time::timeout(Duration::from_secs(5), store.prune_finished(30 * DAY, 500))
        .await
        .expect("the prune does not wait for the held run")
        .unwrap();
    assert_eq!(pruned, Pruned { runs: 1, steps: 2 });
    assert!(!run_exists(&store, free).await);
    assert!(run_exists(&store, held).await, "the held run was skipped");

    holder.commit().await.unwrap();
    assert_eq!(store.prune_finished(30 * DAY, 500).await.unwrap().runs, 1, "taken once released");
    assert!(!run_exists(&store, held).await);
}

async fn archived(pool: &PgPool, table: &str, column: &str, ids: &[Uuid]) -> i64 {
    sqlx::query_scalar(&format!("SELECT count(*) FROM archived_{table} WHERE {column} = ANY($1)"))
        .bind(ids)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// With `Prune::Archive` (`RARA_ARCHIVE=true`) the run and everything under it are in the
/// archive tables, as they were, and gone from the live ones; what stays live is not copied.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn archiving_copies_a_pruned_run_with_everything_under_it_before_deleting_it(pool: PgPool) {
    let store = Store::new(pool.clone());
    let old = succeeded_run(&store, &pool, 40).await;
    let recent = succeeded_run(&store, &pool, 1).await;
    let steps = step_ids(&pool, old).await;
    let live: serde_json::Value = sqlx::query_scalar("SELECT to_jsonb(s) FROM steps s WHERE id = $1")
        .bind(steps[0])
        .fetch_one(&pool)
        .await
        .unwrap();

    let pruned = store.prune(30 * DAY, 500, Prune::Archive).await.unwrap();
    assert_eq!(pruned, Pruned { runs: 1, steps: 2 });
    assert!(!run_exists(&store, old).await, "deleted from the live tables");
    assert_eq!(archived(&pool, "workflow_runs", "id", &[old]).await, 1);
    assert_eq!(archived(&pool, "steps", "id", &steps).await, 2);
    assert_eq!(archived(&pool, "step_dependencies", "step_id", &steps).await, 1);
    assert_eq!(archived(&pool, "step_attempts", "step_id", &steps).await, 2);
    assert_eq!(archived(&pool, "artifacts", "step_id", &steps).await, 2);
    let copy: serde_json::Value = sqlx::query_scalar("SELECT to_jsonb(s) FROM archived_steps s WHERE id = $1")
        .bind(steps[0])
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(copy, live, "the archived step is the step as it was");
    assert!(run_exists(&store, recent).await);
    assert_eq!(archived(&pool, "workflow_runs", "id", &[recent]).await, 0, "a run that stays is not copied");
    assert_eq!(store.prune_finished(30 * DAY, 500).await.unwrap(), Pruned::default());
}
