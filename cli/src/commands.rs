//! The commands, each a thin layer over the store.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use rara_domain::config::Config;
use rara_domain::state::RunStatus;
use rara_domain::workflow::{Format, WorkflowDefinition};
use rara_store::Store;
use sqlx::migrate::MigrateDatabase;
use uuid::Uuid;

use crate::Failure;
use crate::table;

pub async fn connect(config: &Config) -> Result<Store, Failure> {
    Store::connect(&config.database_url, 2)
        .await
        .context("cannot connect to the database at DATABASE_URL (is Postgres running? did you run `rara migrate`?)")
        .map_err(Failure::from)
}

/// Creates the database if missing and migrates; returns whether it was created.
pub async fn migrate_quietly(config: &Config) -> Result<bool, Failure> {
    let created = if sqlx::Postgres::database_exists(&config.database_url).await.context("cannot reach Postgres")? {
        false
    } else {
        sqlx::Postgres::create_database(&config.database_url).await.context("cannot create the database")?;
        true
    };
    connect(config).await?.migrate().await?;
    Ok(created)
}

pub async fn migrate(config: &Config, json: bool) -> Result<(), Failure> {
    let created = migrate_quietly(config).await?;
    if json {
        println!("{}", serde_json::json!({ "migrated": true, "database_created": created }));
    } else {
        println!("{}database is up to date", if created { "created the database; " } else { "" });
    }
    Ok(())
}

pub async fn submit(config: &Config, file: &Path, watch: bool, json: bool) -> Result<(), Failure> {
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let plan = WorkflowDefinition::parse(&text, Format::from_path(file))
        .and_then(|definition| definition.plan(config))
        .with_context(|| format!("{} is not a valid workflow definition", file.display()))?;
    let store = connect(config).await?;
    let submitted = store.submit(&plan).await?;
    if json {
        println!("{}", serde_json::json!({ "id": submitted.run_id, "created": submitted.created }));
    } else if submitted.created {
        println!("{}", submitted.run_id);
    } else {
        println!("{}", submitted.run_id);
        eprintln!("note: idempotency key matched an existing run; nothing new was submitted");
    }
    if watch {
        return finish_watch(&store, submitted.run_id, Duration::from_millis(500), None, json).await;
    }
    Ok(())
}

async fn finish_watch(
    store: &Store,
    run_id: Uuid,
    interval: Duration,
    timeout: Option<Duration>,
    json: bool,
) -> Result<(), Failure> {
    let watching = crate::watch::watch(store, run_id, json, interval);
    let run = match timeout {
        None => watching.await?,
        Some(limit) => match tokio::time::timeout(limit, watching).await {
            Ok(run) => run?,
            Err(_) => {
                eprintln!("run {run_id} is still running after {} s", limit.as_secs());
                return Err(Failure::silent(crate::watch::STILL_RUNNING));
            }
        },
    };
    if json {
        println!("{}", serde_json::to_string(&run).context("cannot encode the run")?);
    } else {
        print!("{}", table::run(&run));
    }
    match crate::watch::exit_code(run.status) {
        0 => Ok(()),
        code => Err(Failure::silent(code)),
    }
}

pub async fn watch(
    config: &Config,
    run_id: Uuid,
    interval_ms: u64,
    timeout: Option<Duration>,
    json: bool,
) -> Result<(), Failure> {
    let store = connect(config).await?;
    finish_watch(&store, run_id, Duration::from_millis(interval_ms.max(50)), timeout, json).await
}

pub async fn list(config: &Config, status: Option<RunStatus>, limit: u32, json: bool) -> Result<(), Failure> {
    let runs = connect(config).await?.list_runs(status, limit).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&runs).context("cannot encode the runs")?);
    } else {
        print!("{}", table::runs(&runs));
    }
    Ok(())
}

/// Cancels a run, or else a step, by id.
pub async fn cancel(config: &Config, id: Uuid, reason: &str, json: bool) -> Result<(), Failure> {
    let store = connect(config).await?;
    let (kind, cancelled) = match store.cancel_run(id, reason).await {
        Ok(n) => ("run", n),
        Err(rara_store::Error::RunNotFound(_)) => ("step", u64::from(store.cancel_step(id, reason).await?)),
        Err(e) => return Err(e.into()),
    };
    if json {
        println!("{}", serde_json::json!({"id": id, "kind": kind, "cancelled_steps": cancelled}));
    } else if cancelled == 0 {
        println!("{kind} {id} had nothing left to cancel");
    } else {
        println!("cancelled {kind} {id} ({cancelled} step{})", if cancelled == 1 { "" } else { "s" });
    }
    Ok(())
}

pub async fn retry(config: &Config, step_id: Uuid, json: bool) -> Result<(), Failure> {
    let store = connect(config).await?;
    let revived = store.retry_step(step_id).await?;
    let run_id = store.run_of_step(step_id).await?;
    if json {
        println!("{}", serde_json::json!({"step_id": step_id, "run_id": run_id, "revived_steps": revived}));
    } else if revived == 0 {
        return Err(anyhow::anyhow!("step {step_id} has not failed or been cancelled; nothing to retry").into());
    } else {
        println!("step {step_id} will run again ({revived} step(s) back to pending in run {run_id})");
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
