//! `rara rerun RUN --from STEP`: a new run made from a finished one, in which STEP and
//! everything downstream of it run again and every other step is carried over with its output
//! (docs/src/guide/recover.md). Inputs given replace the original's (`--input` typed like the
//! original's value: a string input stays text).

use std::time::Duration;

use clap::Args;
use rara_domain::workflow::WorkflowRef;
use rara_store::rerun::RerunRequest;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::submit::InputArgs;
use crate::Failure;
use crate::exit::ExitCode;

/// Rerun a run from a step: a new run, linked to it, in which the step and everything
/// downstream of it run again; every other step is carried over (not run) with its output.
#[derive(Debug, Args)]
pub struct RerunArgs {
    /// The run to rerun (it keeps its history; the rerun is a new run).
    pub(crate) run_id: Uuid,
    /// The step to run again, with everything downstream of it.
    #[arg(long, value_name = "STEP")]
    pub(crate) from: String,
    /// Run inputs that replace the original's, by name.
    #[command(flatten)]
    pub(crate) input: InputArgs,
    /// Rerun even when a carried-over step read a run input that changes (it keeps the output
    /// it made from the old value).
    #[arg(long)]
    pub(crate) force: bool,
    /// Make the rerun from this registered version (`NAME@VERSION`, `NAME` for the newest)
    /// instead of the original's steps: refused unless the steps carried over are unchanged in it.
    #[arg(long, value_name = "NAME@VERSION")]
    pub(crate) workflow: Option<WorkflowRef>,
    /// Watch the rerun until it ends (exit code 5 if it does not succeed).
    #[arg(long)]
    pub(crate) watch: bool,
}

pub async fn run(args: RerunArgs, json: bool) -> Result<(), Failure> {
    let config = super::config()?;
    let store = super::connect(&config).await?;
    let original = store.run_inputs(args.run_id).await?;
    // `--input`'s text is typed as the original value is: a string input stays text.
    let declared: Map<String, Value> = original
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, v)| v.is_string())
        .map(|(k, _)| (k.clone(), json!({"type": "string"})))
        .collect();
    let given = args.input.given(&declared)?;
    let inputs = rara_domain::inputs::replace(&original, &given, config.max_input_bytes).map_err(|problems| {
        let lines: Vec<String> = problems.iter().map(|p| format!("{}: {}", p.path, p.message)).collect();
        Failure::new(ExitCode::Usage, lines.join("\n"))
    })?;
    let inputs = inputs.as_object().cloned().unwrap_or_default();
    let version = match &args.workflow {
        None => None,
        Some(workflow) => {
            let builtins = rara_builtins::registry()?;
            let in_process = |op: &str, v: Option<&str>| builtins.in_process(op, v).is_some();
            Some(rara_operator::rerun::plan_version(&store, &config, &in_process, &inputs, workflow).await)
        }
    };
    let made = match version.transpose() {
        Ok(version) => {
            let request =
                RerunRequest { from: Some(args.from), idempotency_key: None, inputs, force: args.force, version };
            store.rerun(args.run_id, &request).await
        }
        Err(e) => Err(e),
    };
    let rerun = match made {
        Ok(rerun) => rerun,
        Err(e @ rara_store::Error::RerunRefused(_)) => return Err(Failure::new(ExitCode::RerunRefused, e)),
        Err(e) => return Err(e.into()),
    };
    if json {
        println!("{}", serde_json::to_string(&rerun).unwrap_or_default());
    } else {
        println!("{}", rerun.run_id);
        let carried = if rerun.carried.is_empty() { "none".to_owned() } else { rerun.carried.join(", ") };
        eprintln!("rerun of {}: runs again {}; carried over {carried}", rerun.rerun_of, rerun.rerun.join(", "));
    }
    if args.watch {
        return super::watch::until_done(&store, rerun.run_id, Duration::from_millis(500), None, json).await;
    }
    Ok(())
}
