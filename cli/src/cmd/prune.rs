//! `rara prune`: delete finished runs older than a duration, with everything under them, in
//! batches ([`rara_store::retention`]); `--dry-run` only counts them.

use std::time::Duration;

use anyhow::Context;
use clap::Args;
use rara_runtime::pruned_objects::{ObjectsPruned, RUNS_PER_PASS, delete_pruned};
use rara_store::retention::{Prune as How, Pruned};

use crate::Failure;

/// Delete finished runs (succeeded, failed, cancelled) older than a duration, with their steps,
/// attempts and artifacts.
#[derive(Debug, Args)]
pub struct Prune {
    /// How long ago a run must have finished: a whole number with a unit, `s`, `m`, `h` or `d`
    /// (`0s`, `90m`, `12h`, `7d`).
    #[arg(long, value_name = "DURATION", value_parser = rara_domain::human::parse_duration)]
    older_than: Duration,
    /// Print how many runs (and steps) would be deleted, and delete nothing.
    #[arg(long)]
    dry_run: bool,
    /// Copy the runs and everything under them into the `archived_*` tables before deleting
    /// them (in the same statement), as the scheduler does with `RARA_ARCHIVE=true`.
    #[arg(long)]
    archive: bool,
    /// Runs deleted per statement.
    #[arg(long, default_value_t = rara_runtime::settings::DEFAULT_PRUNE_BATCH,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    batch_size: u32,
}

pub async fn run(args: Prune, json: bool) -> Result<(), Failure> {
    let store = super::connect(&super::config()?).await?;
    let ago = rara_domain::human::duration(args.older_than);
    if args.dry_run {
        let would = store.prunable(args.older_than).await?;
        if json {
            println!("{}", report(&args, would));
        } else {
            println!("would delete {} runs ({} steps) finished more than {ago} ago", would.runs, would.steps);
        }
        return Ok(());
    }
    // With RARA_ARTIFACTS_URI, the pruned runs' objects are deleted after their rows.
    let artifacts = rara_platform::aws::artifact_store_from_env().await?;
    let mut total = Pruned::default();
    // Until a batch finds nothing: a run another transaction holds makes a batch short, not
    // the last one.
    loop {
        let how = if args.archive { How::Archive } else { How::Delete };
        let batch = store.prune_queueing(args.older_than, args.batch_size, how, artifacts.is_some()).await?;
        if batch.runs == 0 {
            break;
        }
        total += batch;
        if !json {
            eprintln!("deleted {} runs ({} steps); {} runs so far", batch.runs, batch.steps, total.runs);
        }
    }
    let objects = match &artifacts {
        Some(artifacts) => Some(delete_objects(&store, &**artifacts, json).await?),
        None => None,
    };
    if json {
        let mut value = report(&args, total);
        value["objects"] = serde_json::to_value(objects).context("cannot encode the report")?;
        println!("{value}");
    } else {
        let done = if args.archive { "archived and deleted" } else { "deleted" };
        println!("{done} {} runs ({} steps) finished more than {ago} ago", total.runs, total.steps);
    }
    Ok(())
}

/// Passes over the queued runs' objects until none is left or a pass fails to delete some
/// (they stay queued: the next prune tries again).
async fn delete_objects(
    store: &rara_store::Store,
    artifacts: &dyn rara_artifacts::ArtifactStore,
    json: bool,
) -> Result<ObjectsPruned, Failure> {
    let mut total = ObjectsPruned::default();
    loop {
        let pass = delete_pruned(store, artifacts, RUNS_PER_PASS).await?;
        total += pass;
        if pass.failed > 0 || pass.runs == 0 {
            break;
        }
    }
    if !json {
        eprintln!("deleted {} objects of {} pruned runs from the artifact store", total.objects, total.runs);
        if total.failed > 0 {
            eprintln!("could not delete the objects of {} runs: the next prune tries again", total.failed);
        }
    }
    Ok(total)
}

fn report(args: &Prune, pruned: Pruned) -> serde_json::Value {
    serde_json::json!({
        "older_than_seconds": args.older_than.as_secs(),
        "dry_run": args.dry_run,
        "archived": args.archive && !args.dry_run,
        "runs": pruned.runs,
        "steps": pruned.steps,
    })
}
