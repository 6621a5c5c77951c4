//! `rara migrate`: create the database if missing and apply pending migrations.

use anyhow::Context;
use clap::Args;
use rara_domain::config::Config;
use sqlx::migrate::MigrateDatabase;

use crate::Failure;

/// Create the database if missing and apply pending migrations (idempotent).
#[derive(Debug, Args)]
pub struct Migrate {}

pub async fn run(_: Migrate, json: bool) -> Result<(), Failure> {
    let created = migrate_quietly(&super::config()?).await?;
    if json {
        println!("{}", serde_json::json!({ "migrated": true, "database_created": created }));
    } else {
        println!("{}database is up to date", if created { "created the database; " } else { "" });
    }
    Ok(())
}

/// Creates the database if missing and migrates; returns whether it was created.
pub async fn migrate_quietly(config: &Config) -> Result<bool, Failure> {
    let created = if sqlx::Postgres::database_exists(&config.database_url).await.context("cannot reach Postgres")? {
        false
    } else {
        sqlx::Postgres::create_database(&config.database_url).await.context("cannot create the database")?;
        true
    };
    super::connect(config).await?.migrate().await?;
    Ok(created)
}
