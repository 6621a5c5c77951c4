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
//!   timeline, step details), live updates by SSE ([`Updates::Live`]; none under Lambda),
//!   forms for cancel and retry.
//! - [`live`]: one Postgres listener on the console channel, fanned out to every SSE stream.
//! - [`auth`]: who may change state (the token, the IAM operators), the console's session and
//!   its keys (one material, a key per purpose).
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

pub use auth::{Auth, Caller, ConsoleKey};
pub use error::{Error, ErrorBody};

/// The largest request body accepted (a definition of a thousand steps fits many times over).
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// How a console page learns of changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Updates {
    /// Pages subscribe to a server-sent event stream (`rara ui`, a long-lived server): the
    /// server registers a console listener while one is open.
    #[default]
    Live,
    /// Pages carry no live script and the event routes answer `204 No Content` (which tells an
    /// `EventSource` to stop reconnecting) without subscribing: under Lambda a response is
    /// buffered, so a stream would hold an invocation until the timeout and register a
    /// listener for nothing (docs: internals/api-console.md, "Under Lambda").
    Static,
}

/// What every handler shares. Cheap to clone.
#[derive(Clone)]
pub struct Api {
    inner: Arc<Inner>,
    updates: Updates,
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
        f.debug_struct("Api").field("auth", &self.inner.auth).field("updates", &self.updates).finish_non_exhaustive()
    }
}

impl Api {
    pub fn new(store: Store, config: Config, auth: Auth) -> Result<Self, rara_builtins::Error> {
        let builtins = rara_builtins::registry()?;
        let live = live::Live::new(store.clone());
        Ok(Api { inner: Arc::new(Inner { store, config, builtins, auth, live }), updates: Updates::Live })
    }

    /// The same API with pages that learn of changes as `updates` says.
    pub fn with_updates(mut self, updates: Updates) -> Self {
        self.updates = updates;
        self
    }

    pub fn updates(&self) -> Updates {
        self.updates
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
