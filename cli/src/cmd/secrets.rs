//! `rara secrets`: the grants that let workflows (by name pattern) or operations resolve
//! secrets (`{"$secret": name}`), and optionally the only hosts an `http.request` may send
//! them to. Without a grant a reference is refused at submit and at claim
//! (`SECRET_NOT_GRANTED`); docs/src/guide/secrets.md says why.

use anyhow::Context;
use clap::{Args, Subcommand};
use rara_domain::secret_material::MAX_NAME_LEN;

use crate::Failure;
use crate::exit::ExitCode;

/// Grant secrets to workflows or operations, revoke grants, list them.
#[derive(Debug, Args)]
pub struct Secrets {
    #[command(subcommand)]
    command: SecretsCommand,
}

/// Which workflows and operations a grant covers (patterns: `*` matches any run of characters).
#[derive(Debug, Args)]
struct Scope {
    /// A secret name, or a pattern (`payments/*`).
    #[arg(value_parser = pattern)]
    secret: String,
    /// The workflows (run names) allowed, as a pattern (`billing-*`); default any.
    #[arg(long, value_parser = pattern)]
    workflow: Option<String>,
    /// The operations allowed, as a pattern (`http.request`); default any.
    #[arg(long, value_parser = pattern)]
    operation: Option<String>,
}

#[derive(Debug, Subcommand)]
enum SecretsCommand {
    /// Let the workflows and/or operations named resolve a secret:
    /// `rara secrets grant stripe-key --workflow 'billing-*' --operation http.request --host api.stripe.com`.
    /// At least one of --workflow and --operation; granting the same scope again replaces its hosts.
    Grant {
        #[command(flatten)]
        scope: Scope,
        /// Only to this host may an `http.request` send the secret (repeat for several; a
        /// pattern such as `*.example.com`). Without it, any host.
        #[arg(long = "host", value_parser = host)]
        hosts: Vec<String>,
    },
    /// Revoke the grant of exactly this scope; steps not yet run that need it fail at claim.
    Revoke {
        #[command(flatten)]
        scope: Scope,
    },
    /// Every grant.
    List,
}

/// A pattern: not empty, at most [`MAX_NAME_LEN`] characters, no control characters.
fn pattern(text: &str) -> Result<String, String> {
    if text.is_empty() || text.len() > MAX_NAME_LEN || text.chars().any(char::is_control) {
        return Err(format!("expected 1 to {MAX_NAME_LEN} characters without control characters"));
    }
    Ok(text.to_owned())
}

/// A host name or pattern, lower-cased: no scheme, path, port or user.
fn host(text: &str) -> Result<String, String> {
    let text = pattern(text)?;
    if text.contains(['/', ':', '@', ' ']) && !text.starts_with('[') {
        return Err("a host alone (`api.example.com`, `*.example.com`, `[::1]`): no scheme, port or path".into());
    }
    Ok(text.to_ascii_lowercase())
}

pub async fn run(args: Secrets, json: bool) -> Result<(), Failure> {
    let store = super::connect(&super::config()?).await?;
    match args.command {
        SecretsCommand::Grant { scope, hosts } => {
            if scope.workflow.is_none() && scope.operation.is_none() {
                return Err(Failure::new(
                    ExitCode::Usage,
                    format!(
                        "say who may resolve {0:?}: --workflow PATTERN and/or --operation PATTERN (`--workflow '*'` \
                         grants it to every workflow)",
                        scope.secret
                    ),
                ));
            }
            let (workflow, operation) = scope_of(&scope);
            let hosts = (!hosts.is_empty()).then_some(hosts.as_slice());
            let grant = store.grant_secret(&scope.secret, workflow, operation, hosts).await?;
            if json {
                println!("{}", serde_json::to_string(&grant).context("cannot encode the grant")?);
            } else {
                println!("{}", describe(&grant));
            }
        }
        SecretsCommand::Revoke { scope } => {
            let (workflow, operation) = scope_of(&scope);
            let revoked = store.revoke_secret(&scope.secret, workflow, operation).await?;
            if json {
                let out = serde_json::json!({"secret": scope.secret, "workflow": workflow, "operation": operation, "revoked": revoked});
                println!("{out}");
            } else if revoked {
                println!("revoked {} for workflow {workflow} operation {operation}", scope.secret);
            } else {
                return Err(Failure::new(
                    ExitCode::NotFound,
                    format!("no grant of {} to workflow {workflow} operation {operation}", scope.secret),
                ));
            }
        }
        SecretsCommand::List => {
            let grants = store.secret_grants().await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&grants).context("cannot encode the grants")?);
            } else if grants.is_empty() {
                println!("no grants: every secret reference is refused (rara secrets grant NAME --workflow PATTERN)");
            } else {
                for grant in &grants {
                    println!("{}", describe(grant));
                }
            }
        }
    }
    Ok(())
}

fn scope_of(scope: &Scope) -> (&str, &str) {
    (scope.workflow.as_deref().unwrap_or("*"), scope.operation.as_deref().unwrap_or("*"))
}

fn describe(grant: &rara_store::grants::Grant) -> String {
    let hosts = match &grant.hosts {
        Some(hosts) => hosts.join(","),
        None => "any".to_owned(),
    };
    format!("{}  workflow {}  operation {}  hosts {}", grant.secret, grant.workflow, grant.operation, hosts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_names_alone() {
        assert_eq!(host("API.Example.com").as_deref(), Ok("api.example.com"));
        assert_eq!(host("*.example.com").as_deref(), Ok("*.example.com"));
        assert_eq!(host("[::1]").as_deref(), Ok("[::1]"));
        for bad in ["https://x", "x:443", "x/y", "u@x", ""] {
            assert!(host(bad).is_err(), "{bad}");
        }
    }
}
