//! The lease statement reads the partial index `steps_due`, however much finished history
//! the table holds (DESIGN.md "Staying fast"), and `steps_due_key` with 100 concurrency keys
//! (DESIGN.md "Flow control"); a prune batch reads only the runs it deletes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use rara_store::Store;
use rara_store::sql::{CLAIM, LEASE_DUE, SUCCEED, catalogue};
use sqlx::PgPool;

/// 20,000 steps in 4 runs, all finished but the first `unfinished` of each run (due).
async fn mostly_finished(pool: &PgPool, unfinished: i32) -> Store {
    let store = Store::new(pool.clone());
    for _ in 0..4 {
        store.submit(&flat_plan(5000)).await.unwrap();
    }
    sqlx::query("UPDATE steps SET status = 'succeeded', finished_at = now() WHERE position >= $1")
        .bind(unfinished)
        .execute(pool)
        .await
        .unwrap();
    store
}

/// `EXPLAIN (<options>, FORMAT JSON)` of the lease of `limit` steps, in a transaction rolled
/// back (`ANALYZE` runs it), over `pool`'s session, after `setup` in that transaction.
async fn explain_lease(pool: &PgPool, options: &str, limit: i64, setup: Option<&str>) -> serde_json::Value {
    let mut tx = pool.begin().await.unwrap();
    if let Some(setup) = setup {
        sqlx::query(setup).execute(&mut *tx).await.unwrap();
    }
    let plan = sqlx::query_scalar(&format!("EXPLAIN ({options}FORMAT JSON) {LEASE_DUE}"))
        .bind(limit)
        .bind("scheduler")
        .bind(60_000_i64)
        .bind(None::<chrono::DateTime<chrono::Utc>>)
        .bind(i64::from(rara_store::lease::LEASE_KEYS_MIN).max(limit))
        .bind(None::<String>)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    plan
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn lease_statement_uses_the_partial_due_index(pool: PgPool) {
    let store = mostly_finished(&pool, 20).await;
    sqlx::query("ANALYZE steps").execute(&pool).await.unwrap();

    let plan = explain_lease(&pool, "", 10, None).await;
    let text = plan.to_string();
    assert!(text.contains("\"Index Name\":\"steps_due\""), "the lease must scan steps_due:\n{text}");
    assert!(seq_scans_of_steps(&plan) == 0, "no sequential scan of steps:\n{text}");
    assert_eq!(store.lease_due("scheduler", 1000, LEASE).await.unwrap().len(), 80);
}

/// Sequential scans of `steps` anywhere in a JSON plan.
fn seq_scans_of_steps(plan: &serde_json::Value) -> usize {
    match plan {
        serde_json::Value::Object(node) => {
            let own = node.get("Node Type").and_then(|t| t.as_str()) == Some("Seq Scan")
                && node.get("Relation Name").and_then(|t| t.as_str()) == Some("steps");
            usize::from(own) + node.values().map(seq_scans_of_steps).sum::<usize>()
        }
        serde_json::Value::Array(items) => items.iter().map(seq_scans_of_steps).sum(),
        _ => 0,
    }
}

/// DESIGN.md "Flow control": with 100 keys of 50 due steps each (and 20,000 finished steps),
/// the lease is still one statement; it walks the keys through `steps_due_key`, scans no
/// `steps` sequentially, takes one step of each key in a batch of 100, and reads a bounded
/// number of buffers per step leased (printed: `cargo test -p rara-store --test explain --
/// --nocapture`).
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_lease_over_100_keys_is_one_statement_through_the_key_index(pool: PgPool) {
    let store = mostly_finished(&pool, 0).await;
    let steps: String = (0..5000)
        .map(|i| format!("  - {{name: s{i}, operation: noop, concurrency: {{key: tenant-{}, limit: 5}}}}\n", i % 100))
        .collect();
    store.submit(&plan(&format!("name: keyed\nsteps:\n{steps}"))).await.unwrap();
    sqlx::query("ANALYZE steps").execute(&pool).await.unwrap();

    let plan = explain_lease(&pool, "ANALYZE, BUFFERS, ", 100, None).await;
    let text = plan.to_string();
    assert!(text.contains("\"Index Name\":\"steps_due_key\""), "the lease must walk steps_due_key:\n{text}");
    assert_eq!(seq_scans_of_steps(&plan), 0, "no sequential scan of steps:\n{text}");
    let top = &plan[0]["Plan"];
    let (rows, buffers) = (top["Actual Rows"].as_u64().unwrap(), top["Shared Hit Blocks"].as_u64().unwrap());
    println!(
        "lease over 100 keys: {rows} steps, {buffers} shared buffers hit ({} per step), {:.1} ms",
        buffers / rows.max(1),
        plan[0]["Execution Time"].as_f64().unwrap()
    );
    assert_eq!(rows, 100);
    assert!(buffers / rows < 200, "{buffers} buffers for {rows} steps");

    let mut keys = std::collections::HashSet::new();
    for leased in store.lease_due("scheduler", 100, LEASE).await.unwrap() {
        let key: String = sqlx::query_scalar("SELECT concurrency_key FROM steps WHERE id = $1")
            .bind(leased.step_id)
            .fetch_one(&pool)
            .await
            .unwrap();
        keys.insert(key);
    }
    assert_eq!(keys.len(), 100, "one step of each key");
}

/// The generic plan (what a prepared statement runs after five executions) of every batch
/// statement that addresses steps by id reaches them through `steps_pkey`, also when the
/// statistics say almost no step is held: the partial index of held steps is the reaper's.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn batch_statements_find_steps_by_primary_key_in_their_generic_plans(pool: PgPool) {
    let store = mostly_finished(&pool, 5).await;
    store.lease_due("scheduler", 10, LEASE).await.unwrap();
    sqlx::query("VACUUM ANALYZE steps").execute(&pool).await.unwrap();

    let mut conn = pool.acquire().await.unwrap();
    for (name, plan) in generic_plans(&mut conn, &BATCHES).await {
        let text = plan.to_string();
        let scans = scans_of_steps(&plan);
        assert!(scans.iter().any(|s| s == "Index Scan steps_pkey"), "{name} must find steps by primary key:\n{text}");
        assert!(
            !scans.iter().any(|s| s.ends_with("steps_held_lease_expiry")),
            "{name} must not scan the reaper's index: {scans:?}:\n{text}"
        );
        // A failure's search for pending dependents to skip (FINISH_TAIL's `skipped`) is
        // planned on estimates of step_dependencies, empty here; the other statements touch
        // no step but those of the batch (a TID scan: the rows a steps_pkey probe found).
        if name != "fail" {
            assert!(
                scans.iter().all(|s| s.ends_with("steps_pkey") || s.starts_with("Tid Scan")),
                "{name} must reach steps only through steps_pkey, not {scans:?}:\n{text}"
            );
        }
    }
}

/// At one step per call on a table with history, Postgres's default plans the claim and the
/// outcome afresh at every execution: the custom plan of a one-element array always looks
/// cheaper than the generic one. The executor's sessions ([`rara_store::executor_session`])
/// plan each once per connection and run that generic plan (journal:
/// `docs/benchmarks/journal/2026-12-07-generic-plans.md`).
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn executor_sessions_plan_the_claim_and_outcome_once_at_one_step_per_call(pool: PgPool) {
    const CALLS: i64 = 12;
    mostly_finished(&pool, 0).await;
    sqlx::query("VACUUM ANALYZE steps, step_attempts, workflow_runs").execute(&pool).await.unwrap();
    let default = (*pool.connect_options()).clone();
    for (options, executor) in [(default.clone(), false), (rara_store::executor_session(default), true)] {
        let one = rara_store::pool_options().max_connections(1).connect_with(options).await.unwrap();
        let store = Store::new(one.clone());
        store.submit(&flat_plan(CALLS as usize)).await.unwrap();
        let leased = store.lease_due("scheduler", CALLS as u32, LEASE).await.unwrap();
        assert_eq!(leased.len() as i64, CALLS);
        for step in &leased {
            let claimed = claim_one(&store, "executor", step).await;
            let recorded = store.succeed(&[(claimed.holder, serde_json::json!({}))]).await.unwrap();
            assert!(recorded.iter().all(Result::is_ok));
        }
        let expected = if executor { (CALLS, 0) } else { (0, CALLS) };
        for (name, statement) in [("claim", CLAIM), ("succeed", SUCCEED.as_str())] {
            let plans: (i64, i64) =
                sqlx::query_as("SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1")
                    .bind(statement)
                    .fetch_one(&one)
                    .await
                    .unwrap();
            assert_eq!(plans, expected, "executor sessions: {executor}; (generic, custom) plans of {name}");
        }
        one.close().await;
    }
}

/// The batch statements that address steps (and their attempts) by id.
const BATCHES: [&str; 13] = [
    "claim",
    "claim_verdicts",
    "quick_lock",
    "quick_succeed",
    "quick_succeed_leaves",
    "succeed",
    "retry",
    "fail",
    "release",
    "release_running",
    "park",
    "attempt_input",
    "expand",
];

/// The generic plan (what a prepared statement runs after five executions) of each catalogued
/// statement named in `names`, over `conn`'s session: `(name, EXPLAIN (FORMAT JSON))`.
async fn generic_plans(conn: &mut sqlx::PgConnection, names: &[&str]) -> Vec<(&'static str, serde_json::Value)> {
    sqlx::query("SET plan_cache_mode = force_generic_plan").execute(&mut *conn).await.unwrap();
    let statements: Vec<_> = catalogue().into_iter().filter(|s| names.contains(&s.name)).collect();
    assert_eq!(statements.len(), names.len(), "every statement named is catalogued");
    let mut plans = Vec::new();
    for statement in statements {
        let (name, sql) = (statement.name, statement.sql);
        // A statement without parameters is prepared and executed without parentheses.
        let list = |items: Vec<&str>| if items.is_empty() { String::new() } else { format!("({})", items.join(", ")) };
        let types = list(statement.params.to_vec());
        sqlx::query(&format!("PREPARE \"{name}\"{types} AS {sql}")).execute(&mut *conn).await.unwrap();
        let nulls = list(vec!["NULL"; statement.params.len()]);
        let plan = sqlx::query_scalar(&format!("EXPLAIN (FORMAT JSON) EXECUTE \"{name}\"{nulls}"))
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        plans.push((name, plan));
    }
    plans
}

/// On a fresh database the first analyze of `step_attempts` sees a few hundred rows (autovacuum
/// analyzes a table after 50 changes), and on such statistics Postgres plans the claim's
/// closing of a taken-over attempt and the outcome's closing of the attempt as a sequential
/// scan of the table. A prepared statement keeps that generic plan until the next analyze, while
/// the table grows: many rows read per step in the early minutes of a benchmark (journal:
/// `docs/benchmarks/journal/2026-12-05-attempts-by-primary-key.md`). rara's sessions
/// turn sequential scans off (`rara_store::SESSION_SETTINGS`: every statement of rara is
/// written to reach its rows through an index; a table without one is still scanned), so the
/// plans read attempts by primary key whatever the statistics say.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn batch_statements_find_attempts_by_primary_key_on_early_statistics(pool: PgPool) {
    let store = mostly_finished(&pool, 5).await;
    store.lease_due("scheduler", 10, LEASE).await.unwrap();
    sqlx::query(
        "INSERT INTO step_attempts (step_id, attempt, fence, leased_by, lease_token, outcome, finished_at)
         SELECT id, 1, position, 'w', gen_random_uuid(), 'succeeded', now()
         FROM steps WHERE status = 'succeeded' AND position < 80",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("VACUUM ANALYZE steps, step_attempts").execute(&pool).await.unwrap();
    let attempt_scans = |plans: &[(&str, serde_json::Value)]| -> Vec<(String, Vec<String>)> {
        plans.iter().map(|(name, plan)| (name.to_string(), scans_of(plan, "step_attempts"))).collect()
    };

    // The fixture reproduces the early plans: without the settings, attempts are scanned.
    let mut plain = pool.acquire().await.unwrap();
    let scanned = attempt_scans(&generic_plans(&mut plain, &["claim", "succeed"]).await);
    assert!(
        scanned.iter().all(|(_, scans)| scans.iter().any(|s| s.starts_with("Seq Scan"))),
        "the fixture no longer makes Postgres scan step_attempts: {scanned:?}"
    );

    let rara =
        rara_store::pool_options().max_connections(1).connect_with((*pool.connect_options()).clone()).await.unwrap();
    let mut conn = rara.acquire().await.unwrap();
    for (name, scans) in attempt_scans(&generic_plans(&mut conn, &BATCHES).await) {
        assert!(
            scans.iter().all(|s| s == "Index Scan step_attempts_pkey"),
            "{name} must reach step_attempts only through its primary key, not {scans:?}"
        );
    }
}

/// The generic plan of a prune batch finds its runs through the partial index of finished
/// runs and deletes them by primary key: never a scan of the whole history (a join with the
/// selected runs hashed all of `workflow_runs` for every batch).
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_prune_batch_reads_only_the_runs_it_deletes_in_its_generic_plan(pool: PgPool) {
    sqlx::query(
        "INSERT INTO workflow_runs (id, name, status, steps_total, steps_unfinished, finished_at)
         SELECT gen_random_uuid(), 'r', CASE WHEN i % 10 = 0 THEN 'running' ELSE 'succeeded' END::rara_run_status,
                1, CASE WHEN i % 10 = 0 THEN 1 ELSE 0 END,
                CASE WHEN i % 10 = 0 THEN NULL ELSE now() - i * interval '1 minute' END
         FROM generate_series(1, 50000) i",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("VACUUM ANALYZE workflow_runs").execute(&pool).await.unwrap();

    let prune = catalogue().into_iter().find(|s| s.name == "prune_runs").expect("prune_runs is catalogued");
    let mut conn = pool.acquire().await.unwrap();
    sqlx::query("SET plan_cache_mode = force_generic_plan").execute(&mut *conn).await.unwrap();
    let types = prune.params.join(", ");
    sqlx::query(&format!("PREPARE prune_runs({types}) AS {}", prune.sql)).execute(&mut *conn).await.unwrap();
    let plan: serde_json::Value = sqlx::query_scalar("EXPLAIN (FORMAT JSON) EXECUTE prune_runs(86400000, 500, true)")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    let scans = scans_of(&plan, "workflow_runs");
    assert!(scans.iter().all(|s| !s.starts_with("Seq Scan")), "no scan of the whole history: {scans:?}\n{plan}");
    assert!(scans.iter().any(|s| s.ends_with("workflow_runs_finished_at")), "{scans:?}");
    assert!(scans.iter().any(|s| s.ends_with("workflow_runs_pkey")), "{scans:?}");
}

/// Every scan of the `steps` table in an EXPLAIN (FORMAT JSON) plan, as "<node type> <index>".
fn scans_of_steps(plan: &serde_json::Value) -> Vec<String> {
    scans_of(plan, "steps")
}

/// Whether Postgres compiled the lease with JIT over `pool`'s session, JIT's threshold at 0
/// (every statement is worth compiling).
async fn lease_compiled_with_jit(pool: &PgPool) -> bool {
    explain_lease(pool, "ANALYZE, ", 10, Some("SET LOCAL jit_above_cost = 0")).await[0].get("JIT").is_some()
}

/// rara's sessions never compile a statement with JIT (`rara_store::SESSION_SETTINGS`): the
/// lease's generic plan is estimated high enough for it, and each compile cost 15–33 ms a
/// call. Where the server can compile, a plain session does; a rara session never does.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn rara_sessions_never_compile_statements_with_jit(pool: PgPool) {
    mostly_finished(&pool, 20).await;
    let rara =
        rara_store::pool_options().max_connections(1).connect_with((*pool.connect_options()).clone()).await.unwrap();
    let jit: String = sqlx::query_scalar("SHOW jit").fetch_one(&rara).await.unwrap();
    assert_eq!(jit, "off");
    assert!(!lease_compiled_with_jit(&rara).await, "a rara session compiled the lease");

    let available: bool = sqlx::query_scalar("SELECT pg_jit_available()").fetch_one(&pool).await.unwrap();
    if available {
        assert!(lease_compiled_with_jit(&pool).await, "the server can compile, and a plain session does");
    } else {
        eprintln!("this server cannot JIT-compile: only rara's setting was checked");
    }
}

/// The statements that read the steps of a run (or of several): through `step_names` by run,
/// then `steps` by primary key; `retryable_steps` through a partial index of failed and cancelled
/// steps (`steps_retryable`, migration 000018, or `steps_error_code`, 000034); `wait_start` through `steps_wait_ready`, `waits_of_run` from `waits`.
const BY_RUN: [&str; 19] = [
    "read_steps",
    "read_dependencies",
    "read_attempts",
    "read_artifacts",
    "step_inputs",
    "detached_attempts",
    "detached_attempts_of_runs",
    "cancel_run",
    "cancel_runs",
    "references",
    "prune_archive_runs",
    "retryable_steps",
    "rerun_steps_of",
    "rerun_carry",
    "replay_candidates",
    "signal",
    "signal_steps",
    "wait_start",
    "waits_of_run",
];

/// Each statement that reads steps by run reaches them through an index that bounds them, in
/// its generic plan on a rara session, with 20,000 steps in 200 runs of history: no sequential
/// scan of `steps`, and no walk of a whole index of it but a partial one (whose predicate is
/// the bound). The list is the catalogue's: every statement that names a run's steps
/// (through `step_names n`, or `= s.run_id`) is in [`BY_RUN`].
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn every_statement_that_reads_steps_by_run_uses_an_index(pool: PgPool) {
    let store = Store::new(pool.clone());
    for _ in 0..200 {
        store.submit(&flat_plan(100)).await.unwrap();
    }
    sqlx::query("UPDATE steps SET status = 'succeeded', finished_at = now() WHERE position >= 5")
        .execute(&pool)
        .await
        .unwrap();
    let run: uuid::Uuid = sqlx::query_scalar("SELECT id FROM workflow_runs LIMIT 1").fetch_one(&pool).await.unwrap();
    store.cancel_run(run, "explained").await.unwrap();
    store.lease_due("scheduler", 10, LEASE).await.unwrap();
    sqlx::query("VACUUM ANALYZE steps, step_names, workflow_runs").execute(&pool).await.unwrap();
    let indexes: Vec<(String, bool)> =
        sqlx::query_as("SELECT indexname::text, indexdef LIKE '% WHERE %' FROM pg_indexes WHERE tablename = 'steps'")
            .fetch_all(&pool)
            .await
            .unwrap();

    let mut by_run: Vec<&str> = catalogue()
        .into_iter()
        .filter(|s| s.sql.contains("step_names n") || s.sql.contains("= s.run_id"))
        .map(|s| s.name)
        .collect();
    by_run.sort_unstable();
    let mut listed = BY_RUN.to_vec();
    listed.sort_unstable();
    assert_eq!(by_run, listed, "every statement that reads steps by run is proven here");

    let rara =
        rara_store::pool_options().max_connections(1).connect_with((*pool.connect_options()).clone()).await.unwrap();
    let mut conn = rara.acquire().await.unwrap();
    let mut unbounded = Vec::new();
    for (name, plan) in generic_plans(&mut conn, &BY_RUN).await {
        // A cancel reads the run's steps in its targets; the finish tail it shares with every
        // failure (which dependents to skip) is planned on the estimates of step_dependencies,
        // empty here (`batch_statements_find_steps_by_primary_key_in_their_generic_plans`).
        let read = if name.starts_with("cancel_run") { subplan(&plan, "CTE targets").expect("targets") } else { &plan };
        for scan in unbounded_steps_scans(read, &indexes) {
            unbounded.push(format!("{name}: {scan}"));
        }
        if name == "retryable_steps" {
            // Either partial index of failed and cancelled steps: `steps_retryable` (by run) or
            // the search's `steps_error_code` (by code and run, migration 000034), same rows.
            let scans = scans_of_steps(&plan);
            let partial = |s: &String| s.ends_with("steps_retryable") || s.ends_with("steps_error_code");
            assert!(scans.iter().any(partial), "{scans:?}:\n{plan}");
        }
    }
    assert!(unbounded.is_empty(), "statements that read steps by run without an index:\n{}", unbounded.join("\n"));
}

/// The node of a plan whose `Subplan Name` is `name` (a CTE's: `CTE <name>`).
fn subplan<'a>(plan: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    match plan {
        serde_json::Value::Array(items) => items.iter().find_map(|i| subplan(i, name)),
        serde_json::Value::Object(node) if node.get("Subplan Name").and_then(|n| n.as_str()) == Some(name) => {
            Some(plan)
        }
        serde_json::Value::Object(node) => node.values().find_map(|v| subplan(v, name)),
        _ => None,
    }
}

/// The scans of `steps` in a plan that no index bounds: a sequential scan, or a scan of a whole
/// index that is not partial (`indexes`: each index of `steps` and whether it is partial).
fn unbounded_steps_scans(plan: &serde_json::Value, indexes: &[(String, bool)]) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![plan];
    while let Some(v) = stack.pop() {
        match v {
            serde_json::Value::Array(items) => stack.extend(items),
            serde_json::Value::Object(node) => {
                let kind = node.get("Node Type").and_then(|t| t.as_str()).unwrap_or_default();
                let relation = node.get("Relation Name").and_then(|r| r.as_str());
                let index = node.get("Index Name").and_then(|i| i.as_str());
                let partial = indexes.iter().find(|(name, _)| Some(name.as_str()) == index).map(|(_, p)| *p);
                if kind == "Seq Scan" && relation == Some("steps") {
                    found.push("Seq Scan".to_owned());
                } else if let Some(partial) = partial
                    && !partial
                    && node.get("Index Cond").is_none()
                {
                    found.push(format!("{kind} {} without a condition", index.unwrap_or("-")));
                }
                stack.extend(node.values());
            }
            _ => {}
        }
    }
    found
}

/// The console overview's statements (`rara_store::overview`, migration
/// `…000031_console_overview.sql`) each reach their rows through an index in their generic plans
/// on a rara session, over 20,000 steps with two days of attempts: attempts through the BRIN
/// index `step_attempts_started_at` (their steps by primary key), the runs running through the
/// partial `workflow_runs_running`, the failed ones through `workflow_runs_finished_at`, the due
/// steps through `steps_due` and `steps_due_key`; no table scanned sequentially.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn every_overview_statement_reads_through_an_index(pool: PgPool) {
    overview_history(&pool, 9).await;
    sqlx::query("VACUUM ANALYZE steps, step_attempts, workflow_runs, waits").execute(&pool).await.unwrap();
    let rara =
        rara_store::pool_options().max_connections(1).connect_with((*pool.connect_options()).clone()).await.unwrap();
    let mut conn = rara.acquire().await.unwrap();
    let names: Vec<&str> = rara_store::overview::STATEMENTS.iter().map(|(name, _, _)| *name).collect();
    for (name, plan) in generic_plans(&mut conn, &names).await {
        let scans: Vec<String> = ["step_attempts", "steps", "workflow_runs", "waits"]
            .into_iter()
            .flat_map(|table| scans_of(&plan, table))
            .collect();
        assert!(!scans.iter().any(|s| s.starts_with("Seq Scan")), "{name} scans a table: {scans:?}\n{plan}");
        let wanted: &[&str] = match name {
            "overview_now" => &["workflow_runs_running", "workflow_runs_finished_at", "steps_due", "steps_due_key"],
            "overview_chart" => &["step_attempts_started_at"],
            _ => &["step_attempts_started_at", "steps_pkey"],
        };
        for index in wanted {
            assert!(scans.iter().any(|s| s.ends_with(&format!(" {index}"))), "{name} reads {index}: {scans:?}\n{plan}");
        }
    }
}
