//! `rara retry`: a new attempt budget for a failed or cancelled step.

use clap::Args;
use uuid::Uuid;

use crate::Failure;

/// Give a failed or cancelled step a new attempt budget; its skipped dependents come back.
#[derive(Debug, Args)]
pub struct Retry {
    pub(crate) step_id: Uuid,
}

pub async fn run(args: Retry, json: bool) -> Result<(), Failure> {
    let step_id = args.step_id;
    let store = super::connect(&super::config()?).await?;
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
