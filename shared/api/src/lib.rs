//! rara's HTTP API and web console: one axum [`Router`], served locally by `rara ui` and in AWS
//! by the `api` Lambda (`functions/api`, through `lambda_http`).
//!
//! # Layout
//!
//! - [`list`]: `GET /api/runs`: the runs list, its filters, its cursor.
//! - [`runs`]: the JSON API under `/api`: submit, a run, cancel a run or
//!   a step, retry a step, bulk cancel/retry by filter with a dry run.
//! - [`artifacts`]: `GET /api/artifacts/{id}`: a presigned redirect (S3) or the bytes streamed.
//! - [`filters`]: the run search's error code, workflow version and input-field filters, checked.
//! - [`submit`]: a definition submitted, whole or registered (what `runs` and `workflows` share).
//! - [`workflows`]: registered definitions under `/api/workflows`: register, list, a version, a
//!   run of one.
//! - [`validate`]: `POST /api/workflows/validate`: a definition checked as submit checks it.
//! - [`schedules`]: schedules under `/api/schedules`: create, list, pause, resume, delete,
//!   trigger, backfill.
//! - [`openapi`]: the OpenAPI document generated from [`runs`] (served at `/openapi.json`,
//!   committed as `docs/openapi.json`).
//! - [`console`]: the server-rendered console: runs list, run page (SVG DAG, attempts
//!   timeline, step details), live updates by SSE ([`Updates::Live`]; none under Lambda),
//!   forms for cancel and retry, the operator pages (schedules, limits, the DLQ).
//! - [`live`]: one Postgres listener on the console channel, fanned out to every SSE stream.
//! - [`auth`]: who may read and who may change state (the token, the session, the IAM
//!   operators), the console's session and login codes, and its keys (one material, a key per
//!   purpose).
//! - [`login`]: the one-time login URL a browser opens for a session (`/login`), and how a token
//!   holder gets one (`POST /api/login`).
//! - [`guard`]: around every request, the `Host` check and the security headers.
//! - [`redact`]: what an anonymous reader does not see (fences and lease data).
//! - [`error`]: the structured errors, `{code, message, field, exit_code}`.
//!
//! Inputs are shown as stored: secret references stay references; rara never holds a value.

pub mod artifacts;
pub mod auth;
pub mod body;
pub mod console;
pub mod error;
pub mod filters;
pub mod guard;
pub mod list;
pub mod live;
pub mod login;
pub mod openapi;
pub mod redact;
pub mod rerun;
pub mod runs;
pub mod schedules;
pub mod submit;
pub mod validate;
pub mod waits;
pub mod workflows;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use rara_domain::config::Config;
use rara_domain::registry::Registry;
use rara_remote::Security;
use rara_store::Store;

pub use auth::{Auth, Caller, ConsoleKey, Reader};
pub use error::{Error, ErrorBody};
pub use guard::Hosts;

/// The largest request body accepted besides a run's inputs (a definition of a thousand steps
/// fits many times over): a body may be larger by `RARA_MAX_INPUT_BYTES`, the bound of the
/// inputs it carries ([`Api::body_limit`]).
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
    hosts: Arc<Hosts>,
    /// How a cancel tells remote executors to stop detached attempts: TLS, token, attempt key.
    remote: Arc<Security>,
    /// The artifact store (`RARA_ARTIFACTS_URI`) artifacts are served from, if any; a
    /// submission's inputs beyond `inline_bytes` are written to it.
    artifacts: Option<Arc<dyn rara_artifacts::ArtifactStore>>,
    /// `RARA_INLINE_OUTPUT_BYTES`: the largest run inputs kept inline when there is a store.
    inline_bytes: usize,
    /// The dead-letter queue the console's `/dlq` page reads, when one is configured.
    dead_letters: Option<Arc<dyn rara_operator::dlq::DeadLetters>>,
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
        f.debug_struct("Api")
            .field("auth", &self.inner.auth)
            .field("updates", &self.updates)
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

impl Api {
    pub fn new(store: Store, config: Config, auth: Auth) -> Result<Self, rara_builtins::Error> {
        let builtins = rara_builtins::registry()?;
        let live = live::Live::new(store.clone());
        let inner = Arc::new(Inner { store, config, builtins, auth, live });
        Ok(Api {
            inner,
            updates: Updates::Live,
            hosts: Arc::default(),
            remote: Arc::default(),
            artifacts: None,
            inline_bytes: rara_artifacts::DEFAULT_INLINE_BYTES,
            dead_letters: None,
        })
    }

    /// The same API telling remote executors with `security` (TLS, the token and the attempt
    /// key, as the executor talks to them) when a cancel reaches a detached attempt; without it,
    /// an executor that asks for a token refuses the cancel (`UNAUTHENTICATED`).
    pub fn with_remote_security(mut self, security: Security) -> Self {
        self.remote = Arc::new(security);
        self
    }

    /// The same API serving artifacts from `store` (`GET /api/artifacts/{id}`), and writing to
    /// it the inputs of a submission that are larger than `inline_bytes`
    /// (`RARA_INLINE_OUTPUT_BYTES`; the run keeps a reference).
    pub fn with_artifacts(mut self, store: Arc<dyn rara_artifacts::ArtifactStore>, inline_bytes: usize) -> Self {
        self.artifacts = Some(store);
        self.inline_bytes = inline_bytes;
        self
    }

    pub fn artifacts(&self) -> Option<&Arc<dyn rara_artifacts::ArtifactStore>> {
        self.artifacts.as_ref()
    }

    /// The largest request body: [`MAX_BODY_BYTES`] and a run's inputs (`RARA_MAX_INPUT_BYTES`,
    /// checked by the planner with its field).
    pub fn body_limit(&self) -> usize {
        MAX_BODY_BYTES.saturating_add(self.inner.config.max_input_bytes)
    }

    /// Where a submission's inputs beyond the inline bound go, when there is a store.
    pub(crate) fn offload(&self) -> Option<rara_operator::inputs::Offload> {
        let store = self.artifacts.clone()?;
        Some(rara_operator::inputs::Offload { store, inline_bytes: self.inline_bytes })
    }

    /// The same API with a `/dlq` page over `dead_letters` (`rara ui`: `RARA_DLQ_URL` and
    /// `RARA_QUEUE_URL`, through `rara_platform::dlq`).
    pub fn with_dead_letters(mut self, dead_letters: Arc<dyn rara_operator::dlq::DeadLetters>) -> Self {
        self.dead_letters = Some(dead_letters);
        self
    }

    pub fn dead_letters(&self) -> Option<&dyn rara_operator::dlq::DeadLetters> {
        self.dead_letters.as_deref()
    }

    pub fn remote_security(&self) -> &Security {
        &self.remote
    }

    /// The same API with pages that learn of changes as `updates` says.
    pub fn with_updates(mut self, updates: Updates) -> Self {
        self.updates = updates;
        self
    }

    pub fn updates(&self) -> Updates {
        self.updates
    }

    /// The same API answering only requests whose `Host` `hosts` allows.
    pub fn with_hosts(mut self, hosts: Hosts) -> Self {
        self.hosts = Arc::new(hosts);
        self
    }

    pub fn hosts(&self) -> &Hosts {
        &self.hosts
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    pub fn auth(&self) -> &Auth {
        &self.inner.auth
    }

    /// The API, the console, the login routes and `/openapi.json`, with the body limit, the
    /// `Host` check and the security headers (on every answer, a 404 included).
    pub fn router(&self) -> Router {
        Router::new()
            .merge(runs::routes())
            .merge(waits::routes())
            .merge(validate::routes())
            .merge(workflows::routes())
            .merge(schedules::routes())
            .merge(rerun::routes())
            .merge(artifacts::routes())
            .merge(console::routes())
            .merge(login::routes())
            .route("/openapi.json", axum::routing::get(openapi::serve))
            .fallback(not_found)
            .layer(DefaultBodyLimit::max(self.body_limit()))
            .layer(middleware::from_fn_with_state(self.clone(), guard::check_host))
            .layer(middleware::map_response(guard::headers))
            .with_state(self.clone())
    }
}

async fn not_found() -> Error {
    Error::not_found("no such page or endpoint")
}
