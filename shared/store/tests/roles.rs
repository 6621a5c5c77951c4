//! The three database roles (migration `…000021_roles.sql`): every table is the owner's and
//! granted to both other roles (a migration that adds a table without grants fails here), the
//! runtime and the console cannot drop or alter what they use, and the two things they did as
//! owners (the console's triggers, the scheduler's `ANALYZE`) work through the owner's
//! SECURITY DEFINER functions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use rara_store::{Store, roles};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use uuid::Uuid;

/// A pool on the test's database acting as `role`.
async fn pool_as(pool: &PgPool, role: &str) -> PgPool {
    let options = roles::acting_as(pool.connect_options().as_ref().clone(), role);
    PgPoolOptions::new().max_connections(2).connect_with(options).await.unwrap()
}

/// The tables of the schema (but sqlx's own) that are not owned by `rara_owner` or have no
/// grant for `rara_runtime` or `rara_console`, each with what it lacks.
async fn tables_outside_the_rule(pool: &PgPool) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT c.relname || ': ' || concat_ws(', ',
                    CASE WHEN c.relowner <> 'rara_owner'::regrole THEN 'not owned by rara_owner' END,
                    CASE WHEN NOT EXISTS (SELECT FROM aclexplode(c.relacl) a WHERE a.grantee = 'rara_runtime'::regrole)
                         THEN 'no grant for rara_runtime' END,
                    CASE WHEN NOT EXISTS (SELECT FROM aclexplode(c.relacl) a WHERE a.grantee = 'rara_console'::regrole)
                         THEN 'no grant for rara_console' END)
         FROM pg_class c
         WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm')
           AND c.relname <> '_sqlx_migrations'
           AND (c.relowner <> 'rara_owner'::regrole
                OR NOT EXISTS (SELECT FROM aclexplode(c.relacl) a WHERE a.grantee = 'rara_runtime'::regrole)
                OR NOT EXISTS (SELECT FROM aclexplode(c.relacl) a WHERE a.grantee = 'rara_console'::regrole))
         ORDER BY 1",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn every_table_is_the_owners_and_granted_to_the_runtime_and_the_console(pool: PgPool) {
    let tables: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_class WHERE relnamespace = current_schema()::regnamespace AND relkind = 'r'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(tables > 10, "the schema has its tables ({tables})");
    assert_eq!(tables_outside_the_rule(&pool).await, Vec::<String>::new(), "docs/src/internals/schema.md \"Roles\"");

    // The check can fail: a table a later migration adds without the grants is named.
    sqlx::query("CREATE TABLE later_table (id int)").execute(&pool).await.unwrap();
    assert_eq!(
        tables_outside_the_rule(&pool).await,
        ["later_table: not owned by rara_owner, no grant for rara_runtime, no grant for rara_console"]
    );
    for sql in
        ["ALTER TABLE later_table OWNER TO rara_owner", "GRANT SELECT ON later_table TO rara_runtime, rara_console"]
    {
        sqlx::query(sql).execute(&pool).await.unwrap();
    }
    assert_eq!(tables_outside_the_rule(&pool).await, Vec::<String>::new());

    // rara's functions and sequences are the owner's too.
    let strays: Vec<String> = sqlx::query_scalar(
        "SELECT proname::text FROM pg_proc WHERE pronamespace = current_schema()::regnamespace
           AND proname LIKE 'rara\\_%' AND proowner <> 'rara_owner'::regrole
         UNION ALL
         SELECT relname::text FROM pg_class WHERE relnamespace = current_schema()::regnamespace
           AND relkind = 'S' AND relowner <> 'rara_owner'::regrole",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(strays, Vec::<String>::new());
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn neither_the_console_nor_the_runtime_may_drop_or_alter_steps(pool: PgPool) {
    for role in [roles::CONSOLE, roles::RUNTIME] {
        let acting = pool_as(&pool, role).await;
        let whoami: String = sqlx::query_scalar("SELECT current_user::text").fetch_one(&acting).await.unwrap();
        assert_eq!(whoami, role);
        for ddl in [
            "DROP TABLE steps",
            "TRUNCATE steps",
            "ALTER TABLE steps DISABLE TRIGGER steps_cancel_notify",
            "ANALYZE steps",
            "CREATE TABLE mine (id int)",
            "INSERT INTO secret_grants (secret) VALUES ('payments/*')",
        ] {
            let refused = sqlx::query(ddl).execute(&acting).await;
            // ANALYZE of a table one does not own is skipped with a WARNING, not an error:
            // the table's statistics say whether it ran.
            if ddl.starts_with("ANALYZE") {
                refused.unwrap();
                continue;
            }
            let error = refused.expect_err(ddl);
            let code = error.as_database_error().and_then(|e| e.code()).map(|c| c.into_owned());
            assert_eq!(code.as_deref(), Some("42501"), "{role}: {ddl}: insufficient_privilege, got {error}");
        }
    }
    let analyzed: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT last_analyze FROM pg_stat_user_tables WHERE relname = 'steps'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(analyzed, None, "a plain ANALYZE by a role that does not own steps did nothing");

    // The console writes no deletes of history; the runtime's prune does.
    let console = pool_as(&pool, roles::CONSOLE).await;
    let error = sqlx::query("DELETE FROM workflow_runs").execute(&console).await.unwrap_err();
    assert_eq!(error.as_database_error().unwrap().code().as_deref(), Some("42501"), "{error}");
    let runtime = pool_as(&pool, roles::RUNTIME).await;
    sqlx::query("DELETE FROM workflow_runs").execute(&runtime).await.unwrap();
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_runtime_analyzes_the_hot_tables_through_the_owners_function(pool: PgPool) {
    let runtime = pool_as(&pool, roles::RUNTIME).await;
    let console = pool_as(&pool, roles::CONSOLE).await;
    Store::new(pool.clone()).submit(&flat_plan(20)).await.unwrap();
    for statement in rara_store::sql::ANALYZE.iter() {
        sqlx::query(statement).execute(&runtime).await.unwrap();
        let refused = sqlx::query(statement).execute(&console).await.unwrap_err();
        assert_eq!(refused.as_database_error().unwrap().code().as_deref(), Some("42501"), "{refused}");
    }
    let reltuples: f32 = sqlx::query_scalar("SELECT reltuples FROM pg_class WHERE oid = 'steps'::regclass")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(reltuples, 20.0, "the runtime's call analyzed steps");

    // The caller chooses when, never what.
    let refused = sqlx::query("SELECT rara_analyze('secret_grants')").execute(&runtime).await.unwrap_err();
    assert_eq!(refused.as_database_error().unwrap().code().as_deref(), Some("22023"), "{refused}");
    // Nobody else may call it at all.
    let public =
        sqlx::query_scalar::<_, bool>("SELECT has_function_privilege('public', 'rara_analyze(text)', 'EXECUTE')")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(!public);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_console_acting_as_its_role_turns_the_triggers_on_and_off(pool: PgPool) {
    let console = Store::new(pool_as(&pool, roles::CONSOLE).await);
    let enabled = || async {
        sqlx::query_scalar::<_, bool>("SELECT rara_console_triggers_enabled()").fetch_one(&pool).await.unwrap()
    };
    assert!(!enabled().await);
    let id = Uuid::new_v4();
    assert!(console.register_console_listener(id, Duration::from_secs(30)).await.unwrap());
    assert!(enabled().await, "the console's registration enabled the triggers as their owner");
    console.unregister_console_listener(id).await.unwrap();
    assert!(!enabled().await, "and disabled them when it ended");

    // The scheduler's maintenance disables them after a console's lapsed registration.
    let runtime = Store::new(pool_as(&pool, roles::RUNTIME).await);
    // A registration of no time has lapsed by the next transaction.
    console.register_console_listener(id, Duration::ZERO).await.unwrap();
    assert!(runtime.quiet_console().await.unwrap());
    assert!(!enabled().await);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn role_members_lists_the_three_roles(pool: PgPool) {
    let members = Store::new(pool).role_members().await.unwrap();
    let names: Vec<&str> = members.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(names, roles::ALL);
    assert!(members.iter().all(|m| m.exists), "{members:?}");
}
