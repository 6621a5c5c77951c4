//! `rara capabilities`: what a remote executor offers.

use clap::Args;

use crate::{Failure, table};

/// List the capabilities (name, version) a remote executor offers.
#[derive(Debug, Args)]
pub struct Capabilities {
    /// e.g. http://127.0.0.1:50051
    endpoint: String,
}

pub async fn run(args: Capabilities, json: bool) -> Result<(), Failure> {
    let endpoint = &args.endpoint;
    // As the functions call it: the TLS settings and token of RARA_REMOTE_* (if set).
    let security = rara_remote::Security::from_lookup(|var| std::env::var(var).ok())?;
    let transport = rara_remote::Transport::default();
    let remote = rara_remote::RemoteExecutors::from_config_value_secured(endpoint, transport, security)?;
    remote.refresh().await;
    let capabilities = remote.capabilities().await;
    if capabilities.is_empty() {
        return Err(
            anyhow::anyhow!("{endpoint} answered no capabilities (is a rara.v1 executor listening there?)").into()
        );
    }
    if json {
        let list: Vec<_> = capabilities
            .iter()
            .map(|c| {
                // The schema as a JSON value when it parses (it should), else as the text sent.
                let schema = c.input_schema.as_deref().map(|text| {
                    serde_json::from_str(text).unwrap_or_else(|_| serde_json::Value::String(text.to_owned()))
                });
                serde_json::json!({"name": c.name, "version": c.version, "description": c.description,
                                   "detachable": c.detachable, "input_schema": schema,
                                   "serving": c.serving})
            })
            .collect();
        println!("{}", serde_json::Value::Array(list));
    } else {
        print!("{}", table::capabilities(&capabilities));
    }
    Ok(())
}
