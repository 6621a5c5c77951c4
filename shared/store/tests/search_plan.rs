//! The runs search's filters each read through their index (migration
//! `…000034_run_search.sql`; issue 48), in the statements that share the search: the runs page
//! (`browse_runs`) and the bulk actions' (`running_runs`, `retryable_steps`,
//! `replay_candidates`). With 20,000 finished runs and 20,000 steps of history, on a rara
//! session (`rara_store::SESSION_SETTINGS`): the plan with every filter given (the values
//! bound, as the first executions of a prepared statement are planned) and the generic plan
//! (every filter a parameter) read `steps_error_code`, `workflow_runs_inputs` and
//! `workflow_runs_workflow`, and neither scans `steps` or `workflow_runs` sequentially. The bulk
//! cancel and retry start from a set a partial index bounds already (the unfinished runs,
//! `workflow_runs_running`; the failed and cancelled steps, `steps_retryable`) and may probe
//! each filter per run by primary key instead. Plans are printed with `-- --nocapture`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use rara_store::Store;
use rara_store::sql::catalogue;
use sqlx::PgPool;

/// The statements of the search, and where the search's parameters are among theirs: the
/// status, name, created after, created before, version, error code, inputs.
const SEARCHES: [(&str, [usize; 7]); 4] = [
    ("browse_runs", [1, 2, 3, 4, 8, 9, 10]),
    ("running_runs", [1, 2, 3, 4, 5, 6, 7]),
    ("retryable_steps", [1, 2, 3, 4, 5, 6, 7]),
    ("replay_candidates", [1, 2, 3, 4, 6, 7, 8]),
];

/// The search's values: name r3, version 2, error E_DOWN, inputs {"tenant": "t7"}.
const VALUES: [&str; 7] = ["NULL", "'r3'", "NULL", "NULL", "2", "'E_DOWN'", "'{\"tenant\": \"t7\"}'"];

async fn history(pool: &PgPool) {
    let store = Store::new(pool.clone());
    for _ in 0..200 {
        store.submit(&flat_plan(100)).await.unwrap();
    }
    sqlx::query(
        "INSERT INTO workflow_runs (id, name, status, steps_total, steps_unfinished, finished_at, inputs, workflow_version,
                                    created_at)
         SELECT gen_random_uuid(), 'r' || (i % 10), 'succeeded', 1, 0, now(),
                jsonb_build_object('tenant', 't' || (i % 100), 'n', i), 1 + i % 3, now() - i * interval '1 second'
         FROM generate_series(1, 20000) i",
    )
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        "UPDATE steps SET status = CASE WHEN position % 100 = 7 THEN 'failed' ELSE 'succeeded' END::rara_step_status,
                finished_at = now(),
                error = CASE WHEN position % 100 = 7 THEN '{\"code\":\"E_DOWN\",\"message\":\"down\",\"retryable\":false}'::jsonb END",
    )
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("VACUUM ANALYZE steps, step_names, workflow_runs").execute(pool).await.unwrap();
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn every_search_filter_reads_through_its_index(pool: PgPool) {
    history(&pool).await;
    let rara =
        rara_store::pool_options().max_connections(1).connect_with((*pool.connect_options()).clone()).await.unwrap();
    let mut conn = rara.acquire().await.unwrap();
    let statements = catalogue();
    for (name, positions) in SEARCHES {
        let statement = statements.iter().find(|s| s.name == name).expect("catalogued");
        let types = statement.params.join(", ");
        sqlx::query(&format!("PREPARE \"{name}\"({types}) AS {}", statement.sql)).execute(&mut *conn).await.unwrap();
        for mode in ["force_custom_plan", "force_generic_plan"] {
            sqlx::query(&format!("SET plan_cache_mode = {mode}")).execute(&mut *conn).await.unwrap();
            let mut args = vec!["NULL".to_owned(); statement.params.len()];
            for (position, value) in positions.iter().zip(VALUES) {
                args[position - 1] = value.to_owned();
            }
            if name == "browse_runs" || name == "replay_candidates" {
                let limit = if name == "browse_runs" { 7 } else { 5 };
                args[limit - 1] = "51".to_owned();
            }
            let plan: serde_json::Value =
                sqlx::query_scalar(&format!("EXPLAIN (FORMAT JSON) EXECUTE \"{name}\"({})", args.join(", ")))
                    .fetch_one(&mut *conn)
                    .await
                    .unwrap();
            let scans: Vec<String> = ["steps", "workflow_runs"].into_iter().flat_map(|t| scans_of(&plan, t)).collect();
            println!("{name} ({mode}): {scans:?}");
            assert!(
                !scans.iter().any(|s| s.starts_with("Seq Scan")),
                "{name} ({mode}) scans a table: {scans:?}\n{plan}"
            );
            let wanted: &[&str] = match name {
                "running_runs" => &["workflow_runs_running", "steps_error_code"],
                // Its steps through `steps_retryable` or `steps_error_code` (the same rows).
                "retryable_steps" => &["steps_error_code"],
                _ => &["steps_error_code", "workflow_runs_inputs", "workflow_runs_workflow"],
            };
            for index in wanted {
                assert!(
                    scans.iter().any(|s| s.ends_with(&format!(" {index}"))),
                    "{name} ({mode}) reads {index}: {scans:?}\n{plan}"
                );
            }
        }
    }
}
