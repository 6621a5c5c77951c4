//! Every statement of the catalogue prepares against the migrated schema, with the
//! parameter types the catalogue says. A statement composed at run time (the fenced writes,
//! the finishing statements) is checked here and nowhere else before it runs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;

use rara_store::sql::catalogue;
use sqlx::postgres::PgTypeInfo;
use sqlx::{Either, Executor, PgPool, Statement, TypeInfo};

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn every_catalogued_statement_prepares_with_its_parameter_types(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let statements = catalogue();
    let mut problems = Vec::new();
    for s in &statements {
        match conn.prepare(s.sql).await {
            Ok(prepared) => {
                let found: Vec<String> = match prepared.parameters() {
                    Some(Either::Left(types)) => types.iter().map(PgTypeInfo::name).map(str::to_lowercase).collect(),
                    Some(Either::Right(n)) => vec!["?".to_owned(); n],
                    None => Vec::new(),
                };
                if found != s.params {
                    problems.push(format!("{}: parameters {found:?}, catalogued {:?}", s.name, s.params));
                }
            }
            Err(e) => problems.push(format!("{}: {e}\n{}", s.name, s.sql)),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    assert!(statements.len() >= 30, "the catalogue lists every statement, found {}", statements.len());
}

/// The files of `sql/` are each in the catalogue (a fragment, as part of its composed
/// statements), so no statement escapes the test above.
#[test]
fn every_sql_file_is_catalogued() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
    let statements = catalogue();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        // The statement without its header comment and markers, as it appears composed.
        let body: String = text.lines().skip_while(|l| l.starts_with("--")).collect::<Vec<_>>().join("\n");
        let probe = body.lines().find(|l| !l.trim().is_empty() && !l.contains('{')).unwrap_or_default();
        if !statements.iter().any(|s| s.sql.contains(probe)) {
            missing.push(path.display().to_string());
        }
    }
    assert!(missing.is_empty(), "not in the catalogue: {missing:?}");
    let names: HashSet<&str> = statements.iter().map(|s| s.name).collect();
    assert_eq!(names.len() + 2, statements.len(), "names are unique (but the ANALYZE of each hot table)");
}
