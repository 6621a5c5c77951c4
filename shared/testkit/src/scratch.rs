//! Scratch databases: a fresh database on the server of `DATABASE_URL`, migrated, dropped
//! at the end. Shared by `rara-bench` and the CLI tests, so it returns errors instead of
//! panicking (a benchmark reports them).
//!
//! ```no_run
//! # async fn example() -> Result<(), sqlx::Error> {
//! let db = rara_testkit::scratch::ScratchDb::on_server_of_env("rara_bench")?;
//! db.create_migrated().await?;
//! // ... connect with db.connect_options() or hand db.url to a process ...
//! db.drop_database().await?;
//! # Ok(())
//! # }
//! ```

use std::str::FromStr;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, Executor, PgConnection};
use uuid::Uuid;

/// Where the scratch databases go when `DATABASE_URL` is not set.
pub const DEFAULT_SERVER_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A scratch database: a name (`<prefix>_<random hex>`) on one server, and how to reach it.
/// Creating it is separate from naming it: a test of `rara migrate` lets the binary create it.
#[derive(Debug, Clone)]
pub struct ScratchDb {
    /// The database name: the prefix and 12 hex digits, so it is safe in SQL unquoted.
    pub name: String,
    /// A URL of the scratch database (the server URL with its database replaced).
    pub url: String,
    options: PgConnectOptions,
    admin: PgConnectOptions,
}

impl ScratchDb {
    /// A scratch database on the server of `DATABASE_URL` (or [`DEFAULT_SERVER_URL`]).
    pub fn on_server_of_env(prefix: &str) -> Result<Self, sqlx::Error> {
        let server = std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_SERVER_URL.to_owned());
        Self::on_server(&server, prefix)
    }

    /// A scratch database on the server of `server_url`; `prefix` is lowercase letters,
    /// digits and underscores. Nothing is created yet.
    pub fn on_server(server_url: &str, prefix: &str) -> Result<Self, sqlx::Error> {
        if prefix.is_empty() || !prefix.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
            return Err(sqlx::Error::Configuration(format!("scratch prefix {prefix:?} is not a plain name").into()));
        }
        let server = PgConnectOptions::from_str(server_url)?;
        let name = format!("{prefix}_{}", &Uuid::new_v4().simple().to_string()[..12]);
        Ok(ScratchDb {
            url: with_database(server_url, &name),
            options: server.clone().database(&name),
            admin: server.database("postgres"),
            name,
        })
    }

    /// How to connect to the scratch database.
    pub fn connect_options(&self) -> PgConnectOptions {
        self.options.clone()
    }

    /// How to connect to the server's `postgres` database (which outlives the scratch one).
    pub fn admin_options(&self) -> PgConnectOptions {
        self.admin.clone()
    }

    /// Creates the database (empty).
    pub async fn create(&self) -> Result<(), sqlx::Error> {
        let mut admin = PgConnection::connect_with(&self.admin).await?;
        // The name is ours: a checked prefix and hex digits.
        admin.execute(format!("CREATE DATABASE {}", self.name).as_str()).await?;
        admin.close().await
    }

    /// Applies rara's migrations to the (created) database.
    pub async fn migrate(&self) -> Result<(), sqlx::Error> {
        let pool = PgPoolOptions::new().max_connections(1).connect_with(self.options.clone()).await?;
        let migrated = rara_store::MIGRATOR.run(&pool).await;
        pool.close().await;
        Ok(migrated?)
    }

    /// Creates the database and migrates it.
    pub async fn create_migrated(&self) -> Result<(), sqlx::Error> {
        self.create().await?;
        self.migrate().await
    }

    /// Drops the database if it exists, closing whatever is still connected to it.
    pub async fn drop_database(&self) -> Result<(), sqlx::Error> {
        let mut admin = PgConnection::connect_with(&self.admin).await?;
        admin.execute(format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name).as_str()).await?;
        admin.close().await
    }

    /// [`drop_database`](Self::drop_database) from synchronous code (a test's `Drop`), on a
    /// thread of its own so it works inside a runtime too. Errors are ignored: cleanup.
    pub fn drop_blocking(&self) {
        let db = self.clone();
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            runtime.block_on(db.drop_database()).ok()
        })
        .join();
    }
}

/// `url` with its database (the path) replaced by `name`, query parameters kept.
fn with_database(url: &str, name: &str) -> String {
    let (head, query) = url.split_once('?').map_or((url, None), |(head, query)| (head, Some(query)));
    let authority = head.find("://").map_or(0, |i| i + 3);
    let server = head[authority..].find('/').map_or(head, |i| &head[..authority + i]);
    match query {
        Some(query) => format!("{server}/{name}?{query}"),
        None => format!("{server}/{name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_of_a_url_is_replaced_and_its_parameters_kept() {
        assert_eq!(with_database("postgres://u@h:5432/postgres", "x"), "postgres://u@h:5432/x");
        assert_eq!(with_database("postgres://u@h/db?sslmode=disable", "x"), "postgres://u@h/x?sslmode=disable");
        assert_eq!(with_database("postgres://u@h", "x"), "postgres://u@h/x");
    }

    #[test]
    fn a_prefix_that_is_not_a_plain_name_is_refused() {
        assert!(ScratchDb::on_server(DEFAULT_SERVER_URL, "bad; DROP").is_err());
        let db = ScratchDb::on_server(DEFAULT_SERVER_URL, "rara_t").unwrap();
        assert!(db.name.starts_with("rara_t_") && db.url.ends_with(&db.name));
    }
}
