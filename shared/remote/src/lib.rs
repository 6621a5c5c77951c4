//! rara's side of the remote executor contract (`rara.v1`, DESIGN.md "Remote executor
//! contract"): a gRPC client that runs steps on remote executors (Python first) and a router
//! that finds which remote executor offers an operation.
//!
//! # Layout
//!
//! - [`pb`]: the Rust code generated from `proto/rara/v1/executor.proto` at build time
//!   (client and server; the server serves tests and embedders). Never edited by hand.
//! - [`bounds`]: what a step may return ([`bounds::Limits`]), checked where it enters.
//! - [`cancel`]: `Cancel`, for a running attempt's client and for an operator's cancel of a
//!   detached attempt (sent to the endpoint the attempt row names).
//! - [`protocol`]: the strict event-order checker every `Execute` stream goes through.
//! - [`client`]: [`RemoteExecutor`], one capability (name and version) on one endpoint, as an
//!   [`rara_domain::executor::Executor`]: streams events (`client/stream.rs`), forwards
//!   progress and artifacts, enforces deadline and cancellation, classifies every failure
//!   (`client/failure.rs`).
//! - [`router`]: [`RemoteExecutors`], the [`rara_domain::registry::RemoteRouter`] built from
//!   `RARA_REMOTE_EXECUTORS`: one lazily connected channel per endpoint, capability discovery
//!   (`router/discovery.rs`) cached with a refresh interval (`router/cache.rs`, pure: it takes
//!   the instants it is asked at), routing by name and version.
//! - [`security`]: how rara proves itself to executors and checks them ([`Security`]: TLS
//!   with a private CA and client identity, the bearer token on every call, the per-attempt
//!   secrets `Attach`, `Cancel` and a superseding `Execute` present).
//! - [`transport`]: the endpoints checked ([`transport::Error`]), their channels and deadlines
//!   ([`Transport`]: connect timeout, TCP and HTTP/2 keep-alive).
//!
//! Dependencies point one way (leaf types at the bottom): `router` uses `client`, `client`
//! uses `cancel` and `protocol`, and every one of them uses `transport` and `pb`, which use
//! nothing of this crate's; no module imports one that imports it back.
//! - [`version`]: how capability versions compare when a step pins none.
//!
//! Wiring, once per Lambda container (inside the Tokio runtime):
//!
//! ```no_run
//! # async fn wire(value: &str) -> Result<(), rara_remote::router::Error> {
//! use std::sync::Arc;
//! let remote = Arc::new(rara_remote::RemoteExecutors::from_config_value(value)?);
//! remote.refresh().await; // pay the first connection and discovery during init
//! let mut registry = rara_domain::registry::Registry::new();
//! registry.with_remote(remote);
//! # Ok(()) }
//! ```

pub mod bounds;
pub mod cancel;
pub mod client;
pub mod pb;
pub mod protocol;
pub mod router;
pub mod security;
pub mod transport;
pub mod version;

pub use bounds::Limits;
pub use client::RemoteExecutor;
pub use router::{RemoteCapability, RemoteExecutors};
pub use security::Security;
pub use transport::Transport;
