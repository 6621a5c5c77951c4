//! rara's HTTP API and web console: one axum [`Router`], served locally by `rara ui` and in AWS
//! by the `api` Lambda (`functions/api`, through `lambda_http`).
//!
//! # Layout
//!
//! - [`runs`]: the JSON API under `/api`: submit, list (filters, cursor), a run, cancel a run or
//!   a step, retry a step, bulk cancel/retry by filter with a dry run.
//! - [`openapi`]: the OpenAPI document generated from [`runs`] (served at `/openapi.json`,
//!   committed as `docs/openapi.json`).
//! - [`console`]: the server-rendered console: runs list, run page (SVG DAG, attempts
//!   timeline, step details), live updates by SSE, forms for cancel and retry.
//! - [`live`]: one Postgres listener on the console channel, fanned out to every SSE stream.
//! - [`auth`]: the token of state-changing requests, the console's session and CSRF token.
//! - [`error`]: the structured errors, `{code, message, field, exit_code}`.
//!
//! Inputs are shown as stored: secret references stay references; rara never holds a value.

pub mod auth;
pub mod console;
pub mod error;
pub mod live;
pub mod openapi;
pub mod runs;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use rara_domain::config::Config;
use rara_domain::registry::Registry;
use rara_store::Store;

pub use auth::Auth;
pub use error::{Error, ErrorBody};

/// The largest request body accepted (a definition of a thousand steps fits many times over).
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// What every handler shares. Cheap to clone.
#[derive(Clone)]
pub struct Api {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    config: Config,
    /// The in-process executors, so a submission is planned as `rara submit` plans it.
    builtins: Registry,
    auth: Auth,
    live: live::Live,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api").field("auth", &self.inner.auth).finish_non_exhaustive()
    }
}

impl Api {
    pub fn new(store: Store, config: Config, auth: Auth) -> Result<Self, rara_builtins::Error> {
        let builtins = rara_builtins::registry()?;
        let live = live::Live::new(store.clone());
        Ok(Api { inner: Arc::new(Inner { store, config, builtins, auth, live }) })
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    pub fn auth(&self) -> &Auth {
        &self.inner.auth
    }

    /// The API, the console and `/openapi.json`, with the body limit.
    pub fn router(&self) -> Router {
        Router::new()
            .merge(runs::routes())
            .merge(console::routes())
            .route("/openapi.json", axum::routing::get(openapi::serve))
            .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
            .with_state(self.clone())
    }
}
