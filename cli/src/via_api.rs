//! `--api URL`: `submit`, `status`, `list`, `cancel` and `retry` through rara's HTTP API instead
//! of the database, for operators without database access. The token of state-changing
//! requests comes from `RARA_API_TOKEN`. An API error exits with the `exit_code` it carries,
//! as the same command would over the database.

use std::time::Duration;

use anyhow::Context;
use rara_domain::state::RunStatus;
use rara_domain::workflow::{Format, WorkflowDefinition};
use rara_store::read::{RunSummary, RunView};
use serde_json::{Value, json};

use crate::cmd::cancel::Cancel;
use crate::cmd::list::List;
use crate::cmd::retry::Retry;
use crate::cmd::submit::Submit;
use crate::exit::ExitCode;
use crate::{Command, Failure, table};

/// Where the token of state-changing requests comes from.
pub const TOKEN_VAR: &str = "RARA_API_TOKEN";

/// How often `submit --watch` asks the API whether the run ended.
const WATCH_INTERVAL: Duration = Duration::from_millis(500);

struct Remote {
    client: reqwest::Client,
    base: String,
    token: Option<String>,
}

/// Runs `command` through the API at `url`.
pub async fn run(command: Command, url: &str, json: bool) -> Result<(), Failure> {
    let remote = Remote {
        client: reqwest::Client::new(),
        base: url.trim_end_matches('/').to_owned(),
        token: std::env::var(TOKEN_VAR).ok().filter(|t| !t.is_empty()),
    };
    match command {
        Command::Submit(args) => remote.submit(args, json).await,
        Command::Status(args) => remote.print_run(&args.run_id.to_string(), json).await.map(|_| ()),
        Command::List(args) => remote.list(args, json).await,
        Command::Cancel(args) => remote.cancel(args, json).await,
        Command::Retry(args) => remote.retry(args, json).await,
        _ => Err(Failure::new(
            ExitCode::Usage,
            "--api works with submit, status, list, cancel and retry; this command needs DATABASE_URL",
        )),
    }
}

/// The commands, each as the same command over the database prints it.
impl Remote {
    async fn submit(&self, args: Submit, json: bool) -> Result<(), Failure> {
        // A file goes whole to /api/runs; a registered workflow is read first (its declarations
        // type the inputs, as a local submit types them) and run by name. The API checks the
        // inputs again against the same declarations.
        let submitted = match (&args.file, &args.workflow) {
            (Some(file), _) => {
                let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
                let mut definition = WorkflowDefinition::parse(&text, Format::from_path(file))
                    .with_context(|| format!("{} is not a valid workflow definition", file.display()))?;
                let inputs = crate::cmd::submit::given_inputs(&args, &definition.inputs)?;
                // `--timeout` replaces the definition's deadline: the definition goes as JSON then.
                let definition = match args.timeout {
                    Some(timeout) => {
                        definition.timeout_seconds = Some(timeout.as_secs());
                        serde_json::to_value(&definition).context("cannot encode the definition")?
                    }
                    None => Value::String(text),
                };
                let body = json!({"definition": definition, "inputs": inputs});
                self.send(reqwest::Method::POST, "/api/runs", Some(body)).await?
            }
            (None, Some(_)) if args.timeout.is_some() => {
                return Err(Failure::new(
                    ExitCode::Usage,
                    "--timeout with --workflow needs DATABASE_URL (or put timeout_seconds in the registered definition)",
                ));
            }
            (None, Some(workflow)) => {
                let name = workflow.name.replace('/', "%2F");
                let version = match workflow.version {
                    Some(version) => version,
                    None => {
                        let versions = self.send(reqwest::Method::GET, &format!("/api/workflows/{name}"), None).await?;
                        versions["versions"][0]["version"].as_i64().unwrap_or_default() as i32
                    }
                };
                let path = format!("/api/workflows/{name}/versions/{version}");
                let found = self.send(reqwest::Method::GET, &path, None).await?;
                let definition: WorkflowDefinition = serde_json::from_value(found["definition"].clone())
                    .map_err(rara_domain::workflow::Error::from)
                    .with_context(|| format!("{}@{version} is not a valid workflow definition", workflow.name))?;
                let inputs = crate::cmd::submit::given_inputs(&args, &definition.inputs)?;
                let body = json!({"version": version, "inputs": inputs});
                self.send(reqwest::Method::POST, &format!("/api/workflows/{name}/runs"), Some(body)).await?
            }
            (None, None) => return Err(Failure::new(ExitCode::Usage, "give a definition FILE or --workflow NAME")),
        };
        let id = submitted["id"].as_str().unwrap_or_default().to_owned();
        if json {
            println!("{submitted}");
        } else {
            println!("{id}");
            if submitted["created"] == false {
                eprintln!("note: idempotency key matched an existing run; nothing new was submitted");
            }
        }
        if args.watch {
            return self.watch(&id, json).await;
        }
        Ok(())
    }

    async fn list(&self, args: List, json: bool) -> Result<(), Failure> {
        let mut path = format!("/api/runs?limit={}", args.limit);
        if let Some(status) = args.status {
            path.push_str(&format!("&status={}", RunStatus::from(status).as_str()));
        }
        let page = self.send(reqwest::Method::GET, &path, None).await?;
        if json {
            println!("{}", serde_json::to_string_pretty(&page["runs"]).context("cannot encode the runs")?);
        } else {
            let runs: Vec<RunSummary> = serde_json::from_value(page["runs"].clone()).context("the API's runs")?;
            print!("{}", table::runs(&runs));
        }
        Ok(())
    }

    async fn cancel(&self, args: Cancel, json: bool) -> Result<(), Failure> {
        // The id names a run or a step, as over the database.
        let body = Some(json!({"reason": args.reason}));
        let done = match self.send(reqwest::Method::POST, &format!("/api/runs/{}/cancel", args.id), body.clone()).await
        {
            Err(failure) if failure.code == ExitCode::NotFound => {
                self.send(reqwest::Method::POST, &format!("/api/steps/{}/cancel", args.id), body).await?
            }
            other => other?,
        };
        if json {
            println!("{done}");
        } else {
            println!(
                "cancelled {} {} ({} steps)",
                done["kind"].as_str().unwrap_or("run"),
                args.id,
                done["cancelled_steps"]
            );
        }
        Ok(())
    }

    async fn retry(&self, args: Retry, json: bool) -> Result<(), Failure> {
        let done = self.send(reqwest::Method::POST, &format!("/api/steps/{}/retry", args.step_id), None).await?;
        if json {
            println!("{done}");
        } else {
            println!(
                "step {} will run again ({} step(s) back to pending in run {})",
                args.step_id,
                done["revived_steps"],
                done["run_id"].as_str().unwrap_or_default()
            );
        }
        Ok(())
    }
}

/// The requests and what several commands share.
impl Remote {
    /// One request; a structured API error becomes a failure with its exit code.
    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Result<Value, Failure> {
        let mut request = self.client.request(method, format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.with_context(|| format!("cannot reach the rara API at {}", self.base))?;
        let status = response.status();
        let body: Value = response.json().await.with_context(|| format!("the API answered {status} without JSON"))?;
        if status.is_success() {
            return Ok(body);
        }
        let code = body["exit_code"]
            .as_u64()
            .and_then(|c| u8::try_from(c).ok())
            .and_then(ExitCode::from_code)
            .unwrap_or(ExitCode::Failure);
        let message = body["message"].as_str().unwrap_or("the API refused the request");
        Err(Failure { code, error: anyhow::anyhow!("{message} ({status})") })
    }

    async fn print_run(&self, id: &str, json: bool) -> Result<RunView, Failure> {
        let body = self.send(reqwest::Method::GET, &format!("/api/runs/{id}"), None).await?;
        let run: RunView = serde_json::from_value(body.clone()).context("the API's run")?;
        if json {
            println!("{}", serde_json::to_string_pretty(&body).context("cannot encode the run")?);
        } else {
            print!("{}", table::run(&run));
        }
        Ok(run)
    }

    /// Waits for the run to end, prints it, and exits as `rara watch` does.
    async fn watch(&self, id: &str, json: bool) -> Result<(), Failure> {
        loop {
            let body = self.send(reqwest::Method::GET, &format!("/api/runs/{id}"), None).await?;
            if body["status"] != "running" {
                break;
            }
            tokio::time::sleep(WATCH_INTERVAL).await;
        }
        let run = self.print_run(id, json).await?;
        match crate::watch::exit_code(run.status) {
            ExitCode::Success => Ok(()),
            code => Err(Failure::silent(code)),
        }
    }
}
