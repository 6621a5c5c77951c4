//! `rara ui`: the HTTP API and the web console ([`rara_api`]) on this machine, until Ctrl-C.
//! A random token is printed with a one-time login URL: the API wants the token as
//! `Authorization: Bearer <token>` on every state-changing request, and opening the URL once
//! gives the browser a session of its own (12 hours; `POST /api/login` with the token gives
//! another URL). Requests whose `Host` is not the bound address, a loopback name (on
//! loopback) or an `--allow-host` name are refused. Off loopback, reads need the session or
//! the token too, and the server starts only with `--insecure-bind`: it speaks plain HTTP.

use std::net::SocketAddr;

use anyhow::Context;
use clap::Args;
use rara_api::auth::session::SESSION_LIFETIME;
use rara_api::{Api, Auth, Hosts};

use crate::Failure;
use crate::exit::ExitCode;

/// Serve the HTTP API and the web console locally (127.0.0.1 by default).
#[derive(Debug, Args)]
pub struct Ui {
    /// The address to listen on; port 0 picks a free one. Off loopback it needs
    /// `--insecure-bind`, and reads need the session or the token.
    #[arg(long, default_value = "127.0.0.1:7878")]
    bind: SocketAddr,
    /// Use this token instead of a random one (for scripts and tests).
    #[arg(long, env = "RARA_UI_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Also answer requests for this host name (`NAME` or `NAME:PORT`; repeatable), e.g. the
    /// name of a proxy in front. Others are refused (`421`), so a page of another site whose
    /// name points at this address cannot read it.
    #[arg(long = "allow-host", value_name = "NAME")]
    allow_host: Vec<String>,
    /// Require the session or the token for reads on loopback too (always so off loopback).
    #[arg(long)]
    read_auth: bool,
    /// Allow a non-loopback `--bind`, although `rara ui` speaks plain HTTP: the token, the
    /// session cookie and every run's data cross the network readable by anyone on the path.
    /// Use it behind a TLS-terminating proxy, or on a network you trust.
    #[arg(long)]
    insecure_bind: bool,
}

pub async fn run(args: Ui, json: bool) -> Result<(), Failure> {
    let loopback = args.bind.ip().is_loopback();
    if !loopback && !args.insecure_bind {
        return Err(Failure::new(
            ExitCode::Usage,
            format!(
                "refusing to serve on {}: rara ui speaks plain HTTP, so off loopback the token, the session \
                 cookie and every run's inputs and outputs would cross the network in cleartext. Bind \
                 127.0.0.1 (and reach it through an SSH tunnel), or put a TLS-terminating proxy in front and \
                 pass --insecure-bind (reads then need the session or the token)",
                args.bind
            ),
        ));
    }
    let config = super::config()?;
    let store = super::connect(&config).await?;
    let dlq_store = store.clone();
    let auth = match args.token {
        Some(token) if !token.is_empty() => Auth::with_token(token),
        _ => Auth::random(),
    };
    let auth = auth.with_read_auth(!loopback || args.read_auth);
    let token = auth.token().unwrap_or_default().to_owned();
    let (code, _) = auth.login_code(SESSION_LIFETIME);
    let listener =
        tokio::net::TcpListener::bind(args.bind).await.with_context(|| format!("cannot listen on {}", args.bind))?;
    let addr = listener.local_addr().context("the listening address")?;
    // Detached attempts are told as the functions call executors (RARA_REMOTE_*).
    let security = rara_remote::Security::from_lookup(|var| std::env::var(var).ok())?;
    let mut api =
        Api::new(store, config, auth)?.with_hosts(Hosts::bound(addr, &args.allow_host)).with_remote_security(security);
    // Artifacts are served from RARA_ARTIFACTS_URI, when set; large run inputs go there.
    if let Some(artifacts) = rara_platform::aws::artifact_store_from_env().await? {
        api = api.with_artifacts(artifacts, super::inline_bytes()?);
    }
    // The `/dlq` page reads the DLQ `rara dlq` reads, when RARA_DLQ_URL and RARA_QUEUE_URL are set.
    if let Some(dead_letters) = rara_platform::dlq::SqsDeadLetters::from_env(dlq_store).await {
        api = api.with_dead_letters(std::sync::Arc::new(dead_letters));
    }
    let url = format!("http://{addr}");
    let login = format!("{url}{}", rara_api::login::path(&code));
    if json {
        println!("{}", serde_json::json!({"url": url, "login_url": login, "token": token}));
    } else {
        println!("rara console: {login} (opens a session once; POST /api/login with the token for another)");
        println!("API: {url}/api (token {token}; OpenAPI at {url}/openapi.json)");
    }
    let stop = super::stop_on_signal();
    axum::serve(listener, api.router())
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await
        .context("the HTTP server failed")?;
    Ok(())
}
