//! `rara cancel`: cancel a run (every unfinished step) or a single step; attempts that run
//! detached on a remote executor are told at once ([`rara_operator::cancel`]).

use clap::Args;
use uuid::Uuid;

use crate::Failure;

/// Cancel a run (every unfinished step) or a single step.
#[derive(Debug, Args)]
pub struct Cancel {
    /// A run id or a step id.
    pub(crate) id: Uuid,
    #[arg(long, default_value = "cancelled by an operator")]
    pub(crate) reason: String,
}

/// Cancels a run, or else a step, by id.
pub async fn run(args: Cancel, json: bool) -> Result<(), Failure> {
    let id = args.id;
    let store = super::connect(&super::config()?).await?;
    // Detached attempts are told as the functions call executors (RARA_REMOTE_*).
    let security = rara_remote::Security::from_lookup(|var| std::env::var(var).ok())?;
    let done = rara_operator::cancel::cancel_with(&security, &store, id, &args.reason).await?;
    let (kind, cancelled) = (done.kind, done.steps);
    for (attempt, told) in &done.told {
        let (endpoint, step, n) = (&attempt.endpoint, attempt.step_id, attempt.attempt);
        match told {
            Ok(true) => eprintln!("told {endpoint} to stop step {step} attempt {n} (running detached)"),
            Ok(false) => eprintln!("step {step} attempt {n} had already ended on {endpoint}"),
            Err(error) => eprintln!(
                "warning: could not tell {endpoint} to stop step {step} attempt {n} ({error}); it stops at its next re-attach"
            ),
        }
    }
    if json {
        println!("{}", serde_json::json!({"id": id, "kind": kind, "cancelled_steps": cancelled}));
    } else if cancelled == 0 {
        println!("{kind} {id} had nothing left to cancel");
    } else {
        println!("cancelled {kind} {id} ({cancelled} step{})", if cancelled == 1 { "" } else { "s" });
    }
    Ok(())
}
