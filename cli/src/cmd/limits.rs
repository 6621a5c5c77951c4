//! `rara limits`: operators' flow-control limits per concurrency key or group of keys
//! (`tenant-*`), and what each key holds, has due and whether it is paused.

use anyhow::Context;
use clap::{Args, Subcommand};
use rara_domain::flow::{Rate, check_key};

use crate::Failure;
use crate::exit::ExitCode;

/// Limit what a concurrency key (or a group of keys, `tenant-*`) holds at once and how fast it
/// is leased; list every key with its limit, held, queued and paused.
#[derive(Debug, Args)]
pub struct Limits {
    #[command(subcommand)]
    command: LimitsCommand,
}

#[derive(Debug, Subcommand)]
enum LimitsCommand {
    /// Set a key's limit (`rara limits set tenant-a 2`), a group's combined limit
    /// (`rara limits set 'tenant-*' 20`), and/or a rate (`--rate 50/s`). A part left out keeps
    /// its current value. A step's own `concurrency.limit` still holds: the smaller one wins.
    Set {
        /// A concurrency key, or a group: a prefix ending in `*`.
        #[arg(value_parser = target)]
        target: String,
        /// At most this many steps of the key (or of the group's keys together) leased or
        /// running at once; 0 holds everything back.
        limit: Option<u32>,
        /// At most COUNT leases per PERIOD (`50/s`, `600/min`, `10/2s`), a token bucket that
        /// allows a burst of a tenth of COUNT.
        #[arg(long)]
        rate: Option<Rate>,
    },
    /// Remove a key's or group's limit and rate.
    Unset {
        #[arg(value_parser = target)]
        target: String,
    },
    /// Every key and group with a limit, held or due steps, or a pause; then every pause.
    List,
}

/// A key, or a group of keys: a prefix ending in `*` (`tenant-*`).
pub fn target(text: &str) -> Result<String, String> {
    match text.strip_suffix('*') {
        Some(prefix) if !prefix.is_empty() => check_key(prefix).map(|()| text.to_owned()),
        Some(_) => Err("a group needs a prefix before its '*' (`tenant-*`)".into()),
        None => check_key(text).map(|()| text.to_owned()),
    }
}

pub async fn run(args: Limits, json: bool) -> Result<(), Failure> {
    let store = super::connect(&super::config()?).await?;
    match args.command {
        LimitsCommand::Set { target, limit, rate } => {
            if limit.is_none() && rate.is_none() {
                return Err(Failure::new(
                    ExitCode::Usage,
                    format!("give a limit, a --rate or both (rara limits set {target} 10 --rate 50/s)"),
                ));
            }
            store.set_limit(&target, limit, rate).await?;
            if json {
                println!(
                    "{}",
                    serde_json::json!({"target": target, "limit": limit, "rate": rate.map(|r| r.to_string())})
                );
            } else {
                let limit = limit.map(|n| format!(" limit {n}")).unwrap_or_default();
                let rate = rate.map(|r| format!(" rate {r}")).unwrap_or_default();
                println!("{target}:{limit}{rate}");
            }
        }
        LimitsCommand::Unset { target } => {
            let removed = store.unset_limit(&target).await?;
            if json {
                println!("{}", serde_json::json!({"target": target, "removed": removed}));
            } else if removed {
                println!("{target}: no operator limit");
            } else {
                return Err(Failure::new(ExitCode::NotFound, format!("{target} has no operator limit")));
            }
        }
        LimitsCommand::List => {
            let keys = store.limits().await?;
            let pauses = store.pauses().await?;
            if json {
                let out = serde_json::json!({"keys": keys, "pauses": pauses});
                println!("{}", serde_json::to_string_pretty(&out).context("cannot encode the limits")?);
            } else {
                print!("{}", crate::table::limits(&keys, &pauses));
            }
        }
    }
    Ok(())
}
