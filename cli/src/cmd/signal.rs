//! `rara signal` and `rara event send`: complete durable waits (docs/src/guide/waits.md).
//! A signal goes to one run's steps waiting for it; an event to every step waiting for its
//! name and key. The same `--id` twice is one delivery.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use rara_store::waits::{Delivery, Signal};
use uuid::Uuid;

use crate::Failure;
use crate::exit::ExitCode;

/// Signal a run: complete the steps that wait for the signal NAME.
#[derive(Debug, Args)]
pub struct SignalArgs {
    pub(crate) run_id: Uuid,
    pub(crate) name: String,
    #[command(flatten)]
    pub(crate) payload: Payload,
    /// Reject instead: the waiting step fails with SIGNAL_REJECTED and this reason; its
    /// dependents are skipped.
    #[arg(long, value_name = "REASON", conflicts_with_all = ["data", "data_file"])]
    pub(crate) reject: Option<String>,
}

/// The payload (the waiting step's output) and the idempotency id.
#[derive(Debug, Args)]
pub struct Payload {
    /// The payload as JSON (default `{}`).
    #[arg(long, value_name = "JSON", conflicts_with = "data_file")]
    pub(crate) data: Option<String>,
    /// The payload from a JSON file.
    #[arg(long, value_name = "PATH")]
    pub(crate) data_file: Option<PathBuf>,
    /// An idempotency id: the same id twice is one delivery (default: a new one).
    #[arg(long)]
    pub(crate) id: Option<String>,
}

/// Events: complete the steps waiting for an event's name and key.
#[derive(Debug, Args)]
pub struct Event {
    #[command(subcommand)]
    pub(crate) command: EventCommand,
}

#[derive(Debug, Subcommand)]
pub enum EventCommand {
    /// Send an event NAME with --key: every step waiting for that name and key completes.
    Send {
        name: String,
        #[arg(long)]
        key: String,
        #[command(flatten)]
        payload: Payload,
    },
}

impl Payload {
    fn value(&self) -> Result<serde_json::Value, Failure> {
        let text = match (&self.data, &self.data_file) {
            (Some(text), _) => text.clone(),
            (None, Some(path)) => std::fs::read_to_string(path)
                .map_err(|e| Failure::new(ExitCode::Usage, format!("cannot read {}: {e}", path.display())))?,
            (None, None) => return Ok(serde_json::json!({})),
        };
        serde_json::from_str(&text).map_err(|e| Failure::new(ExitCode::Usage, format!("the payload is not JSON: {e}")))
    }

    /// The id (given or new) and the payload, bounded with the reason like the API bounds them.
    fn checked(&self, reject: Option<&str>) -> Result<(String, serde_json::Value), Failure> {
        let id = self.id.clone().unwrap_or_else(|| Uuid::new_v4().to_string());
        let payload = self.value()?;
        rara_domain::wait::check_delivery(&id, reject, &payload)
            .map_err(|(field, why)| Failure::new(ExitCode::Usage, format!("--{field}: {why}")))?;
        Ok((id, payload))
    }
}

fn check_name(name: &str, what: &str) -> Result<(), Failure> {
    if rara_domain::wait::valid_wait_name(name) {
        return Ok(());
    }
    Err(Failure::new(ExitCode::Usage, format!("{what} {name:?} must be 1 to 128 ASCII letters, digits and . _ : -")))
}

pub async fn signal(args: SignalArgs, json: bool) -> Result<(), Failure> {
    check_name(&args.name, "the signal")?;
    let (id, payload) = args.payload.checked(args.reject.as_deref())?;
    let signal = Signal { id, payload, reject: args.reject };
    let store = super::connect(&super::config()?).await?;
    store.run_status(args.run_id).await?;
    let (delivery, steps, paused) = match store.signal(args.run_id, &args.name, &signal).await? {
        Delivery::Delivered { steps, paused } => ("delivered", steps, paused),
        Delivery::Kept { steps } => ("kept", steps, false),
        Delivery::Duplicate => ("duplicate", Vec::new(), false),
        Delivery::NotWaiting(why) => return Err(Failure::new(ExitCode::NotWaiting, why)),
        Delivery::Invalid(problems) => {
            let lines: Vec<String> = problems.iter().map(|(path, why)| format!("data{path}: {why}")).collect();
            return Err(Failure::new(
                ExitCode::Usage,
                format!("the payload fails the wait's schema:\n{}", lines.join("\n")),
            ));
        }
    };
    if json {
        let out = serde_json::json!({"delivery": delivery, "id": signal.id, "steps": steps, "paused": paused});
        println!("{out}");
        return Ok(());
    }
    let steps = steps.join(", ");
    match delivery {
        "delivered" if paused => {
            println!("signal {} completed {steps}; the run is paused: applied once it is resumed", args.name)
        }
        "delivered" => println!("signal {} completed {steps}", args.name),
        "kept" => println!("signal {} kept for {steps} (it has not begun to wait)", args.name),
        _ => println!("signal {} with id {} was received already; nothing changed", args.name, signal.id),
    }
    Ok(())
}

pub async fn event(args: Event, json: bool) -> Result<(), Failure> {
    let EventCommand::Send { name, key, payload } = args.command;
    check_name(&name, "the event")?;
    let (id, value) = payload.checked(None)?;
    if key.is_empty() || key.chars().count() > rara_domain::wait::MAX_KEY_LEN {
        return Err(Failure::new(ExitCode::Usage, "--key must be 1 to 256 characters"));
    }
    let store = super::connect(&super::config()?).await?;
    let receipt = store.send_event(&name, &key, &id, &value).await?;
    if json {
        println!("{}", serde_json::json!({"id": id, "fresh": receipt.fresh, "completed": receipt.completed}));
    } else if !receipt.fresh {
        println!("event {name} with id {id} was received already; nothing changed");
    } else {
        println!("event {name} (key {key}) completed {} waiting step(s)", receipt.completed);
    }
    Ok(())
}
