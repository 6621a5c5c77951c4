//! The rules on what a step is submitted with (migration 000014) and on a run's name and trace
//! context (migration 000015): checked where those columns are written, on every insert and on
//! an update that sets one of them, not at the lease, the claim and the outcome. A broken rule
//! is refused with the name of its rule and SQLSTATE 23514 (check_violation), as the CHECK
//! constraints they were said; nothing of the statement lands.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use rara_store::Store;
use sqlx::PgPool;
use uuid::Uuid;

/// Each rule: a column assignment that breaks it (on a step without a concurrency key nor a
/// parent), and the rule's name.
const BROKEN: [(&str, &str); 8] = [
    ("timeout_seconds = 0", "steps_timeout_positive"),
    ("retry_initial_delay_ms = -1", "steps_retry_valid"),
    ("retry_max_delay_ms = retry_initial_delay_ms - 1", "steps_retry_valid"),
    ("retry_multiplier = 0.5", "steps_retry_valid"),
    ("concurrency_limit = 2", "steps_concurrency_limit_keyed"),
    ("map_index = 0", "steps_map_child_whole"),
    ("map_max_concurrency = 0", "steps_map_concurrency_positive"),
    ("map_tolerated_failures = -1", "steps_map_tolerated_failures_valid"),
];

/// The rule a failed statement on `steps` names, after checking it failed as a CHECK
/// constraint does.
fn violated(result: Result<sqlx::postgres::PgQueryResult, sqlx::Error>) -> String {
    violated_on("steps", result)
}

/// [`violated`] on `table`.
fn violated_on(table: &str, result: Result<sqlx::postgres::PgQueryResult, sqlx::Error>) -> String {
    let error = result.expect_err("the statement breaks a rule");
    let db = error.as_database_error().expect("a database error");
    assert_eq!(db.code().as_deref(), Some("23514"), "check_violation: {db}");
    assert_eq!(db.table(), Some(table));
    let name = db.constraint().expect("the rule's name").to_owned();
    assert!(db.message().contains(&format!("violates check constraint \"{name}\"")), "{}", db.message());
    name
}

/// One step, submitted valid, and its id.
async fn one_step(pool: &PgPool) -> Uuid {
    let run = Store::new(pool.clone()).submit(&flat_plan(1)).await.unwrap().run_id;
    step_id(pool, run, "s0").await
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn an_update_that_sets_a_setting_is_checked_by_its_rule(pool: PgPool) {
    let step = one_step(&pool).await;
    for (assignment, rule) in BROKEN {
        let result =
            sqlx::query(&format!("UPDATE steps SET {assignment} WHERE id = $1")).bind(step).execute(&pool).await;
        assert_eq!(violated(result), rule, "{assignment}");
    }
    // A keyed limit and a whole map child are allowed.
    sqlx::query("UPDATE steps SET concurrency_key = 'k', concurrency_limit = 2, map_max_concurrency = 3 WHERE id = $1")
        .bind(step)
        .execute(&pool)
        .await
        .expect("a valid update");
    let limit: Option<i32> = sqlx::query_scalar("SELECT concurrency_limit FROM steps WHERE id = $1")
        .bind(step)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(limit, Some(2));
}

/// The settings columns, copied from a valid step by an insert.
const SETTINGS: [&str; 8] = [
    "timeout_seconds",
    "retry_initial_delay_ms",
    "retry_max_delay_ms",
    "retry_multiplier",
    "concurrency_limit",
    "map_index",
    "map_max_concurrency",
    "map_tolerated_failures",
];

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn an_insert_with_one_broken_row_is_refused_whole(pool: PgPool) {
    let template = one_step(&pool).await;
    let run: Uuid =
        sqlx::query_scalar("SELECT run_id FROM steps WHERE id = $1").bind(template).fetch_one(&pool).await.unwrap();
    for (assignment, rule) in BROKEN {
        // Two copies of the valid step under new names in one statement, the second one broken.
        let (broken, value) = assignment.split_once(" = ").unwrap();
        let value = value.replace("retry_initial_delay_ms", "s.retry_initial_delay_ms");
        let copied: Vec<String> =
            SETTINGS
                .iter()
                .map(|c| {
                    if *c == broken { format!("CASE WHEN n = 2 THEN {value} ELSE s.{c} END") } else { format!("s.{c}") }
                })
                .collect();
        let sql = format!(
            "INSERT INTO steps (id, run_id, name, position, operation, max_attempts, {})
             SELECT gen_random_uuid(), s.run_id, s.name || '-' || n, s.position + n, s.operation, s.max_attempts, {}
             FROM steps s, generate_series(1, 2) n WHERE s.id = $1",
            SETTINGS.join(", "),
            copied.join(", ")
        );
        let result = sqlx::query(&sql).bind(template).execute(&pool).await;
        assert_eq!(violated(result), rule, "{assignment}");
    }
    let steps: i64 =
        sqlx::query_scalar("SELECT count(*) FROM steps WHERE run_id = $1").bind(run).fetch_one(&pool).await.unwrap();
    assert_eq!(steps, 1, "nothing of a refused statement landed");

    // The same copies, unbroken, land.
    let sql = format!(
        "INSERT INTO steps (id, run_id, name, position, operation, max_attempts, {0})
         SELECT gen_random_uuid(), s.run_id, s.name || '-' || n, s.position + n, s.operation, s.max_attempts, {0}
         FROM steps s, generate_series(1, 2) n WHERE s.id = $1",
        SETTINGS.join(", ")
    );
    sqlx::query(&sql).bind(template).execute(&pool).await.expect("valid copies");
    let steps: i64 =
        sqlx::query_scalar("SELECT count(*) FROM steps WHERE run_id = $1").bind(run).fetch_one(&pool).await.unwrap();
    assert_eq!(steps, 3);
}

/// The transitions never set a setting: a step whose settings were broken behind the rules'
/// back (the trigger disabled) is still leased, claimed and finished, which a CHECK constraint
/// would refuse at each of them.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_lease_the_claim_and_the_outcome_do_not_check_settings(pool: PgPool) {
    let store = Store::new(pool.clone());
    let step = one_step(&pool).await;
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("ALTER TABLE steps DISABLE TRIGGER steps_settings_updated").execute(&mut *tx).await.unwrap();
    sqlx::query("UPDATE steps SET map_tolerated_failures = -1 WHERE id = $1")
        .bind(step)
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query("ALTER TABLE steps ENABLE TRIGGER steps_settings_updated").execute(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();

    let leased = store.lease_due("scheduler", 10, LEASE).await.unwrap();
    assert_eq!(leased.len(), 1);
    let claimed = claim_all(&store, "executor", &leased).await;
    let items: Vec<_> = claimed.iter().map(|c| (c.holder.clone(), serde_json::json!({}))).collect();
    assert!(store.succeed(&items).await.unwrap().iter().all(Result::is_ok));
    assert_eq!(status(&pool, step).await, "succeeded");

    let again =
        sqlx::query("UPDATE steps SET map_tolerated_failures = -1 WHERE id = $1").bind(step).execute(&pool).await;
    assert_eq!(violated(again), "steps_map_tolerated_failures_valid", "setting it is still refused");
}

/// A run's name and trace context: refused on insert and on an update that sets them, under
/// their rules' names; the outcome that updates the run's counters does not check them.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_runs_name_and_trace_context_are_checked_where_they_are_written(pool: PgPool) {
    let insert = |name: &'static str, trace: Option<&'static str>| {
        let pool = pool.clone();
        async move {
            sqlx::query(
                "INSERT INTO workflow_runs (id, name, status, steps_total, steps_unfinished, trace_context)
                 VALUES (gen_random_uuid(), $1, 'running', 0, 0, coalesce($2, rara_new_traceparent()))",
            )
            .bind(name)
            .bind(trace)
            .execute(&pool)
            .await
        }
    };
    assert_eq!(violated_on("workflow_runs", insert("", None).await), "workflow_runs_name_not_empty");
    assert_eq!(
        violated_on("workflow_runs", insert("r", Some("00-not-a-traceparent")).await),
        "workflow_runs_trace_context_traceparent"
    );
    let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM workflow_runs").fetch_one(&pool).await.unwrap();
    assert_eq!(runs, 0, "nothing of a refused insert landed");
    insert("r", None).await.expect("a valid run");

    // A run submitted through the store, its name broken behind the rule's back: its step's
    // outcome still updates the run and finishes it.
    let store = Store::new(pool.clone());
    let run = store.submit(&flat_plan(1)).await.unwrap().run_id;
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("ALTER TABLE workflow_runs DISABLE TRIGGER workflow_runs_submitted_checked")
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query("UPDATE workflow_runs SET name = '' WHERE id = $1").bind(run).execute(&mut *tx).await.unwrap();
    sqlx::query("ALTER TABLE workflow_runs ENABLE TRIGGER workflow_runs_submitted_checked")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let leased = store.lease_due("scheduler", 10, LEASE).await.unwrap();
    let claimed = claim_all(&store, "executor", &leased).await;
    let items: Vec<_> = claimed.iter().map(|c| (c.holder.clone(), serde_json::json!({}))).collect();
    assert!(store.succeed(&items).await.unwrap().iter().all(Result::is_ok));
    assert_eq!(run_status(&pool, run).await, "succeeded");

    sqlx::query("UPDATE workflow_runs SET name = 'renamed' WHERE id = $1")
        .bind(run)
        .execute(&pool)
        .await
        .expect("a valid name");
    let again =
        sqlx::query("UPDATE workflow_runs SET trace_context = 'x' WHERE id = $1").bind(run).execute(&pool).await;
    assert_eq!(violated_on("workflow_runs", again), "workflow_runs_trace_context_traceparent");
    let again = sqlx::query("UPDATE workflow_runs SET name = '' WHERE id = $1").bind(run).execute(&pool).await;
    assert_eq!(violated_on("workflow_runs", again), "workflow_runs_name_not_empty");
}

/// What the four foreign keys on `steps` refused at insert (a dependency, an artifact or a wait
/// of a step that does not exist), the statement triggers of migration 000035 refuse: with the
/// key's name and SQLSTATE 23503 (foreign_key_violation), nothing of the statement landing.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_row_for_a_step_that_does_not_exist_is_refused_as_its_foreign_key_did(pool: PgPool) {
    let run = Store::new(pool.clone()).submit(&flat_plan(2)).await.unwrap().run_id;
    let (s0, s1) = (step_id(&pool, run, "s0").await, step_id(&pool, run, "s1").await);
    let missing = Uuid::new_v4();
    let dependency = "INSERT INTO step_dependencies (step_id, depends_on) VALUES ($1, $3), ($1, $2)";
    let artifact = "INSERT INTO artifacts (step_id, attempt, fence, name, uri)
                    VALUES ($3, 1, 1, 'report', 's3://b/k'), ($2, 1, 1, 'report', 's3://b/k')";
    let wait = "INSERT INTO waits (step_id, run_id, attempt, kind, name, token)
                VALUES ($3, $1, 1, 'signal', 'go', 't0'), ($2, $1, 1, 'signal', 'go', 't1')";
    let refused = [
        (dependency, [s0, missing, s1], "step_dependencies", "step_dependencies_depends_on_fkey"),
        (dependency, [missing, s1, s0], "step_dependencies", "step_dependencies_step_id_fkey"),
        (artifact, [run, missing, s0], "artifacts", "artifacts_step_id_fkey"),
        (wait, [run, missing, s0], "waits", "waits_step_id_fkey"),
    ];
    for (sql, [a, b, c], table, key) in refused {
        let result = sqlx::query(sql).bind(a).bind(b).bind(c).execute(&pool).await;
        let error = result.expect_err("a row names a step that does not exist");
        let db = error.as_database_error().expect("a database error");
        assert_eq!(db.code().as_deref(), Some("23503"), "foreign_key_violation: {db}");
        assert_eq!((db.table(), db.constraint()), (Some(table), Some(key)), "{db}");
        assert!(db.message().contains(&format!("violates foreign key constraint \"{key}\"")), "{}", db.message());
    }
    for table in ["step_dependencies", "artifacts", "waits"] {
        let rows: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {table}")).fetch_one(&pool).await.unwrap();
        assert_eq!(rows, 0, "nothing of a refused statement lands in {table}");
    }
    // Rows of steps that exist land.
    sqlx::query("INSERT INTO step_dependencies (step_id, depends_on) VALUES ($1, $2)")
        .bind(s1)
        .bind(s0)
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query(artifact).bind(run).bind(s1).bind(s0).execute(&pool).await.unwrap();
    sqlx::query(wait).bind(run).bind(s1).bind(s0).execute(&pool).await.unwrap();
}
