//! `rara submit`: store a workflow definition as a run, optionally watching it. Run inputs
//! given with `--input KEY=VALUE` (a string) or `--input-json KEY=JSON` add to or override the
//! definition's `inputs:`; the plan checks them with the steps' references. The run's trace
//! starts here: in the caller's trace when `TRACEPARENT` is set (DESIGN.md "Tracing").

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use rara_domain::workflow::{Format, WorkflowDefinition};

use crate::Failure;

/// Submit a workflow definition (JSON or YAML) and print the run id.
#[derive(Debug, Args)]
pub struct Submit {
    /// The definition file; `.json` is read as JSON, anything else as YAML.
    file: PathBuf,
    /// Watch the run until it ends (exit code 5 if it does not succeed).
    #[arg(long)]
    watch: bool,
    /// A run input, as a string: adds to or overrides the definition's `inputs:` (steps read it
    /// with `{"$input": "/KEY"}`). Repeatable.
    #[arg(long = "input", value_name = "KEY=VALUE", value_parser = text_input)]
    inputs: Vec<(String, serde_json::Value)>,
    /// A run input as any JSON value (`--input-json 'limits={"n": 3}'`), like `--input`.
    #[arg(long = "input-json", value_name = "KEY=JSON", value_parser = json_input)]
    json_inputs: Vec<(String, serde_json::Value)>,
}

/// `KEY=VALUE`: the value as a JSON string.
fn text_input(arg: &str) -> Result<(String, serde_json::Value), String> {
    let (key, value) = split_input(arg)?;
    Ok((key, serde_json::Value::String(value.to_owned())))
}

/// `KEY=JSON`: the value parsed as JSON.
fn json_input(arg: &str) -> Result<(String, serde_json::Value), String> {
    let (key, value) = split_input(arg)?;
    let value = serde_json::from_str(value).map_err(|e| format!("the value of {key:?} is not JSON: {e}"))?;
    Ok((key, value))
}

fn split_input(arg: &str) -> Result<(String, &str), String> {
    match arg.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value)),
        _ => Err("expected KEY=VALUE with a non-empty KEY".to_owned()),
    }
}

pub async fn run(args: Submit, json: bool) -> Result<(), Failure> {
    let config = super::config()?;
    let file = &args.file;
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let mut given = std::collections::HashSet::new();
    if let Some((key, _)) = args.inputs.iter().chain(&args.json_inputs).find(|(key, _)| !given.insert(key)) {
        return Err(Failure { code: 2, error: anyhow::anyhow!("the run input {key:?} is given twice") });
    }
    // Steps routing gives an in-process executor must fit one invocation: they cannot detach.
    let builtins = rara_runtime::wiring::builtin_registry()?;
    let in_process = |operation: &str, version: Option<&str>| builtins.in_process(operation, version).is_some();
    let plan = WorkflowDefinition::parse(&text, Format::from_path(file))
        .and_then(|mut definition| {
            definition.inputs.extend(args.inputs.into_iter().chain(args.json_inputs));
            definition.plan_for(&config, in_process)
        })
        .with_context(|| format!("{} is not a valid workflow definition", file.display()))?;
    let store = super::connect(&config).await?;
    // The run's trace: a new root span, in the caller's trace when TRACEPARENT is set.
    rara_runtime::telemetry::install("rara-cli", &rara_runtime::telemetry::Config::from_env()?)?;
    let caller = std::env::var("TRACEPARENT").ok().and_then(|t| rara_runtime::telemetry::parse_traceparent(&t));
    let trace_context = rara_runtime::telemetry::new_traceparent(caller.as_ref());
    let started = std::time::SystemTime::now();
    let submitted = store.submit_traced(&plan, Some(&trace_context)).await?;
    if let (true, Some(run)) = (submitted.created, rara_runtime::telemetry::parse_traceparent(&trace_context)) {
        rara_runtime::telemetry::emit_run_span(
            &run,
            caller,
            submitted.run_id,
            &plan.name,
            started,
            std::time::SystemTime::now(),
        );
        rara_runtime::telemetry::flush().await;
    }
    if json {
        println!("{}", serde_json::json!({ "id": submitted.run_id, "created": submitted.created }));
    } else {
        println!("{}", submitted.run_id);
        if !submitted.created {
            eprintln!("note: idempotency key matched an existing run; nothing new was submitted");
        }
    }
    if args.watch {
        return super::watch::until_done(&store, submitted.run_id, Duration::from_millis(500), None, json).await;
    }
    Ok(())
}
