//! `rara ui`: the HTTP API and the web console ([`rara_api`]) on this machine, until Ctrl-C.
//! A random token is printed with the URL: the API wants it as `Authorization: Bearer <token>`
//! on every state-changing request, and opening the printed URL gives the browser a session.

use std::net::SocketAddr;

use anyhow::Context;
use clap::Args;
use rara_api::{Api, Auth};

use crate::Failure;

/// Serve the HTTP API and the web console locally (127.0.0.1 by default).
#[derive(Debug, Args)]
pub struct Ui {
    /// The address to listen on; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:7878")]
    bind: SocketAddr,
    /// Use this token instead of a random one (for scripts and tests).
    #[arg(long, env = "RARA_UI_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

pub async fn run(args: Ui, json: bool) -> Result<(), Failure> {
    let config = super::config()?;
    let store = super::connect(&config).await?;
    let auth = match args.token {
        Some(token) if !token.is_empty() => Auth::with_token(token),
        _ => Auth::random(),
    };
    let token = auth.token().unwrap_or_default().to_owned();
    let api = Api::new(store, config, auth)?;
    let listener =
        tokio::net::TcpListener::bind(args.bind).await.with_context(|| format!("cannot listen on {}", args.bind))?;
    let addr = listener.local_addr().context("the listening address")?;
    let url = format!("http://{addr}");
    if json {
        println!("{}", serde_json::json!({"url": url, "token": token}));
    } else {
        println!("rara console: {url}/?token={token}");
        println!("API: {url}/api (token {token}; OpenAPI at {url}/openapi.json)");
    }
    let stop = super::stop_on_signal();
    axum::serve(listener, api.router())
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await
        .context("the HTTP server failed")?;
    Ok(())
}
