//! `rara cancel`: cancel a run (every unfinished step) or a single step.

use clap::Args;
use uuid::Uuid;

use crate::Failure;

/// Cancel a run (every unfinished step) or a single step.
#[derive(Debug, Args)]
pub struct Cancel {
    /// A run id or a step id.
    id: Uuid,
    #[arg(long, default_value = "cancelled by an operator")]
    reason: String,
}

/// Cancels a run, or else a step, by id.
pub async fn run(args: Cancel, json: bool) -> Result<(), Failure> {
    let (id, reason) = (args.id, args.reason.as_str());
    let store = super::connect(&super::config()?).await?;
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
