//! `rara submit`: store a workflow definition as a run, optionally watching it. The run's
//! inputs are given with `--input KEY=VALUE` (the value as JSON when it parses, else as a string;
//! always the text for an input declared `string`), `--input-json KEY=JSON` and
//! `--input-file FILE.json` (an object of inputs); the plan checks them against the definition's
//! declarations (`inputs:`) with the steps' references. A key given twice is a usage error.
//! The run's trace starts here: in the caller's trace when `TRACEPARENT` is set (DESIGN.md
//! "Tracing").

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use rara_domain::inputs;
use rara_domain::workflow::{Format, WorkflowDefinition, WorkflowRef};
use rara_store::submit::Origin;
use serde_json::{Map, Value};

use crate::Failure;
use crate::exit::ExitCode;

/// Submit a workflow definition (JSON or YAML), or a registered one, and print the run id.
#[derive(Debug, Args)]
pub struct Submit {
    /// The definition file; `.json` is read as JSON, anything else as YAML.
    #[arg(required_unless_present = "workflow", conflicts_with = "workflow")]
    pub(crate) file: Option<PathBuf>,
    /// A registered workflow (`rara workflow register`) instead of a file: `NAME` runs its
    /// newest version, `NAME@VERSION` that version.
    #[arg(long, value_name = "NAME[@VERSION]")]
    pub(crate) workflow: Option<WorkflowRef>,
    /// Watch the run until it ends (exit code 5 if it does not succeed).
    #[arg(long)]
    pub(crate) watch: bool,
    /// The run's deadline from now (`90s`, `30m`, `12h`, `2d`): a run still running then is
    /// cancelled with RUN_TIMED_OUT. Replaces the definition's `timeout_seconds`.
    #[arg(long, value_name = "DURATION", value_parser = rara_domain::human::parse_duration)]
    pub(crate) timeout: Option<Duration>,
    #[command(flatten)]
    pub(crate) input: InputArgs,
}

/// The run inputs of a command: `--input`, `--input-json`, `--input-file`.
#[derive(Debug, Args)]
pub struct InputArgs {
    /// A run input declared in the definition's `inputs:` (steps read it with `{"$input":
    /// "/KEY"}`): VALUE is read as JSON when it parses (`limit=10`, `tags=["a"]`), else as a
    /// string (`date=2026-12-02`); for an input declared `string` (at a rerun: whose value is a
    /// string) it is always the text. Repeatable.
    #[arg(long = "input", value_name = "KEY=VALUE", value_parser = split_input)]
    pub(crate) inputs: Vec<(String, String)>,
    /// A run input as JSON, which must parse (`--input-json 'limits={"n": 3}'`), like `--input`.
    #[arg(long = "input-json", value_name = "KEY=JSON", value_parser = json_input)]
    pub(crate) json_inputs: Vec<(String, Value)>,
    /// A JSON file holding an object of run inputs (`{"date": "2026-12-02", "limit": 5}`).
    /// Repeatable; a key in two places (files or flags) is an error.
    #[arg(long = "input-file", value_name = "FILE")]
    pub(crate) input_files: Vec<PathBuf>,
}

/// `KEY=JSON`: the value parsed as JSON.
fn json_input(arg: &str) -> Result<(String, Value), String> {
    let (key, value) = split_input(arg)?;
    let value = serde_json::from_str(&value).map_err(|e| format!("the value of {key:?} is not JSON: {e}"))?;
    Ok((key, value))
}

fn split_input(arg: &str) -> Result<(String, String), String> {
    match arg.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err("expected KEY=VALUE with a non-empty KEY".to_owned()),
    }
}

fn usage(error: anyhow::Error) -> Failure {
    Failure { code: ExitCode::Usage, error }
}

/// The inputs given on the command line, each key once; `--input`'s text is typed by the
/// declaration of its key ([`inputs::value_of_text`]).
pub(crate) fn given_inputs(args: &Submit, declared: &Map<String, Value>) -> Result<Map<String, Value>, Failure> {
    args.input.given(declared)
}

impl InputArgs {
    /// The inputs given, each key once; `--input`'s text typed by `declared`.
    pub(crate) fn given(&self, declared: &Map<String, Value>) -> Result<Map<String, Value>, Failure> {
        let InputArgs { inputs: texts, json_inputs, input_files } = self;
        let mut given = Map::new();
        let mut add = |key: String, value: Value, from: &str| {
            if given.contains_key(&key) {
                return Err(usage(anyhow::anyhow!("the run input {key:?} is given twice (again {from})")));
            }
            given.insert(key, value);
            Ok(())
        };
        for file in input_files {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read {}", file.display()))
                .map_err(usage)?;
            let object = match serde_json::from_str(&text) {
                Ok(Value::Object(object)) => object,
                Ok(_) => {
                    return Err(usage(anyhow::anyhow!(
                        "{} must hold a JSON object of run inputs ({{\"KEY\": VALUE, ...}})",
                        file.display()
                    )));
                }
                Err(e) => {
                    return Err(usage(anyhow::Error::new(e).context(format!("{} is not JSON", file.display()))));
                }
            };
            for (key, value) in object {
                add(key, value, &format!("in {}", file.display()))?;
            }
        }
        for (key, text) in texts {
            let value = inputs::value_of_text(inputs::declared_type(declared, key), text);
            add(key.clone(), value, "with --input")?;
        }
        for (key, value) in json_inputs {
            add(key.clone(), value.clone(), "with --input-json")?;
        }
        Ok(given)
    }
}

/// The definition in `file`, parsed (not yet checked: see `plan_for`).
pub(crate) fn read_definition(file: &std::path::Path) -> Result<WorkflowDefinition, Failure> {
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    Ok(WorkflowDefinition::parse(&text, Format::from_path(file))
        .with_context(|| format!("{} is not a valid workflow definition", file.display()))?)
}

pub async fn run(args: Submit, json: bool) -> Result<(), Failure> {
    let config = super::config()?;
    // A file (checked before the database is asked anything), or a registered version (the
    // run records which).
    let mut store = None;
    let (definition, origin, what) = match (&args.file, &args.workflow) {
        (Some(file), _) => (read_definition(file)?, Origin::default(), file.display().to_string()),
        (None, Some(workflow)) => {
            let found =
                store.insert(super::connect(&config).await?).definition(&workflow.name, workflow.version).await?;
            let what = format!("{}@{}", found.name, found.version);
            let definition: WorkflowDefinition = serde_json::from_value(found.definition)
                .map_err(rara_domain::workflow::Error::from)
                .with_context(|| format!("{what} is not a valid workflow definition"))?;
            (definition, Origin { workflow_version: Some(found.version), ..Origin::default() }, what)
        }
        (None, None) => return Err(usage(anyhow::anyhow!("give a definition FILE or --workflow NAME"))),
    };
    let mut definition = definition;
    if let Some(timeout) = args.timeout {
        definition.timeout_seconds = Some(timeout.as_secs());
    }
    let given = given_inputs(&args, &definition.inputs)?;
    // Steps routing gives an in-process executor must fit one invocation: they cannot detach.
    let builtins = rara_builtins::registry()?;
    let in_process = |operation: &str, version: Option<&str>| builtins.in_process(operation, version).is_some();
    let plan = definition
        .plan_for(&config, &given, in_process)
        .with_context(|| format!("{what} is not a valid workflow definition"))?;
    let store = match store {
        Some(store) => store,
        None => super::connect(&config).await?,
    };
    // The run's trace: a new root span, in the caller's trace when TRACEPARENT is set.
    rara_platform::telemetry::install("rara-cli", &rara_platform::telemetry::Config::from_env()?)?;
    let caller = std::env::var("TRACEPARENT").ok().and_then(|t| rara_runtime::telemetry::parse_traceparent(&t));
    let trace_context = rara_runtime::telemetry::new_traceparent(caller.as_ref());
    let started = std::time::SystemTime::now();
    let offload = super::inputs_offload(&plan.inputs).await?;
    let name = plan.name.clone();
    let submitted = rara_operator::inputs::submit(&store, offload.as_ref(), plan, Some(&trace_context), origin)
        .await
        .map_err(|e| match e {
        // The store's own error, so its exit code (a conflict, ...) is kept.
        rara_operator::inputs::Error::Store(e) => Failure::from(e),
        other => Failure::from(other),
    })?;
    if let (true, Some(run)) = (submitted.created, rara_runtime::telemetry::parse_traceparent(&trace_context)) {
        rara_runtime::telemetry::emit_run_span(
            &run,
            caller,
            submitted.run_id,
            &name,
            started,
            std::time::SystemTime::now(),
        );
        rara_platform::telemetry::flush().await;
    }
    if json {
        println!("{}", serde_json::json!({ "id": submitted.run_id, "created": submitted.created }));
    } else {
        println!("{}", submitted.run_id);
        if !submitted.created {
            eprintln!("note: idempotency key matched an existing run with the same inputs; nothing new was submitted");
        }
    }
    if args.watch {
        return super::watch::until_done(&store, submitted.run_id, Duration::from_millis(500), None, json).await;
    }
    Ok(())
}
