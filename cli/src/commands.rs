//! The commands, each a thin layer over the store.

use std::path::Path;

use anyhow::Context;
use rara_domain::config::Config;
use rara_domain::workflow::{Format, WorkflowDefinition};
use rara_store::Store;
use sqlx::migrate::MigrateDatabase;
use uuid::Uuid;

use crate::Failure;
use crate::table;

async fn connect(config: &Config) -> Result<Store, Failure> {
    Store::connect(&config.database_url, 2)
        .await
        .context("cannot connect to the database at DATABASE_URL (is Postgres running? did you run `rara migrate`?)")
        .map_err(Failure::from)
}

pub async fn migrate(config: &Config, json: bool) -> Result<(), Failure> {
    let created = if sqlx::Postgres::database_exists(&config.database_url).await.context("cannot reach Postgres")? {
        false
    } else {
        sqlx::Postgres::create_database(&config.database_url).await.context("cannot create the database")?;
        true
    };
    connect(config).await?.migrate().await?;
    if json {
        println!("{}", serde_json::json!({ "migrated": true, "database_created": created }));
    } else {
        println!("{}database is up to date", if created { "created the database; " } else { "" });
    }
    Ok(())
}

pub async fn submit(config: &Config, file: &Path, json: bool) -> Result<(), Failure> {
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let plan = WorkflowDefinition::parse(&text, Format::from_path(file))
        .and_then(|definition| definition.plan(config))
        .with_context(|| format!("{} is not a valid workflow definition", file.display()))?;
    let submitted = connect(config).await?.submit(&plan).await?;
    if json {
        println!("{}", serde_json::json!({ "id": submitted.run_id, "created": submitted.created }));
    } else if submitted.created {
        println!("{}", submitted.run_id);
    } else {
        println!("{}", submitted.run_id);
        eprintln!("note: idempotency key matched an existing run; nothing new was submitted");
    }
    Ok(())
}

pub async fn status(config: &Config, run_id: Uuid, json: bool) -> Result<(), Failure> {
    let run = connect(config).await?.run(run_id).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&run).context("cannot encode the run")?);
    } else {
        print!("{}", table::run(&run));
    }
    Ok(())
}
