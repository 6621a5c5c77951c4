//! The `rara.v1` conformance suite: drives any remote executor endpoint through rara's own
//! client ([`rara_remote`]) and checks every rule of the contract
//! (`proto/rara/v1/executor.proto`), one [`Rule`] each. The suite, not one implementation, is
//! the contract: rara's tests run it against the Python executor and against a minimal Rust
//! executor written from the proto alone, and a broken variant of the latter must fail it.
//!
//! # Running it against your executor
//!
//! Register the four conformance capabilities (below), start the executor, then either
//!
//! ```text
//! cargo run -p rara-conformance -- http://127.0.0.1:50051
//! ```
//!
//! (prints the report; exits 1 when a rule is violated), or call [`run`] from your own test:
//!
//! ```no_run
//! # async fn check() -> Result<(), rara_conformance::Error> {
//! let report = rara_conformance::run("http://127.0.0.1:50051").await?;
//! assert!(report.conforms(), "{report}");
//! # Ok(()) }
//! ```
//!
//! # The conformance capabilities
//!
//! The executor under test registers these, each at version `1.0.0` or later (SemVer); the
//! Python executor does with `--conformance` (or `RARA_WORKER_CONFORMANCE=1`):
//!
//! - [`ECHO`] `conformance.echo`: reports progress 0.5, then one artifact named `echo.json`,
//!   then succeeds with `{"echo": <input>}`.
//! - [`SLEEP`] `conformance.sleep`: input `{"seconds": N}`; reports progress at once and then
//!   at least every 250 ms, and succeeds after `seconds` with `{"slept_seconds": …}` unless
//!   cancelled, its call dropped or its deadline reached. May advertise `detachable`; the
//!   attach rules are checked only when it does.
//! - [`FAIL`] `conformance.fail`: input `{"code", "message", "retryable", "details"}` (details:
//!   string values); fails with exactly that error.
//! - [`CHATTY`] `conformance.chatty`: reports progress every 10 ms or more often, never ends
//!   on its own.
//!
//! # What it checks and how
//!
//! Wire rules (order, sequence numbers, `Cancel`'s answer, `Attach`) are checked on the raw
//! stream of the generated client, every stream through the client's own order checker
//! ([`rara_remote::protocol::EventOrder`]); outcome rules (the output, structured errors, the
//! recorded version) through [`rara_remote::RemoteExecutor`], exactly as a step runs. Every
//! check runs with its own fresh step id; nothing is shared between checks. A run takes a few
//! seconds (one step runs into a 1 s deadline).
//!
//! # Layout
//!
//! - `rules.rs`: the [`Rule`]s and the [`Report`] of a run.
//! - `suite.rs`: the run against one endpoint and the calls every check makes.
//! - `checks/`: the checks, one rule group per file.
//! - `stream.rs`: one stream as a check reads it; `attempt.rs`: a fresh attempt's request.

use std::time::Duration;

mod attempt;
mod checks;
mod rules;
mod stream;
mod suite;

use rara_remote::Security;
use rules::Findings;
pub use rules::{Check, Report, Rule, Verdict};
use suite::Suite;

/// Reports progress 0.5, one artifact `echo.json`, then succeeds with `{"echo": <input>}`.
pub const ECHO: &str = "conformance.echo";
/// Sleeps `seconds`, reporting progress at least every 250 ms; stops when told to.
pub const SLEEP: &str = "conformance.sleep";
/// Fails with the structured error its input spells.
pub const FAIL: &str = "conformance.fail";
/// Reports progress every 10 ms or more often; never ends on its own.
pub const CHATTY: &str = "conformance.chatty";
/// The capabilities an executor under test registers.
pub const CAPABILITIES: [&str; 4] = [ECHO, SLEEP, FAIL, CHATTY];

/// How long a stream that should end soon may take to reach its end.
pub(crate) const STREAM_BOUND: Duration = Duration::from_secs(10);
/// How long a stopped attempt may take from `Cancel` to its `cancelled` event.
pub(crate) const STOP_BOUND: Duration = Duration::from_secs(5);
/// How long after its call is cancelled an attempt may still run.
pub(crate) const CALL_STOP_SETTLE: Duration = Duration::from_secs(1);
/// After the terminal event, how long the stream may stay open (as rara's client allows).
pub(crate) const END_OF_STREAM_GRACE: Duration = rara_remote::client::END_OF_STREAM_GRACE;
/// The deadline of the step that must run into it.
pub(crate) const SHORT_DEADLINE: Duration = Duration::from_secs(1);
/// The heartbeat interval the heartbeat check asks for: well under the gaps between a
/// `conformance.sleep`'s progress reports.
pub(crate) const HEARTBEAT_ASKED_MS: u32 = 50;

/// The endpoint cannot be dialled at all (a bad URL); anything the endpoint does is a
/// [`Verdict`] in the [`Report`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Endpoint(#[from] rara_remote::router::Error),
}

/// Runs every check against the executor at `endpoint` (`http://host:port` or
/// `https://host:port`) and reports each rule's verdict.
pub async fn run(endpoint: &str) -> Result<Report, Error> {
    run_with(endpoint, Security::default()).await
}

/// [`run`] as rara calls: with the TLS trust and identity, the token and the attempt key of
/// `security`. With a token, [`Rule::Authentication`] is checked too (skipped without).
pub async fn run_with(endpoint: &str, security: Security) -> Result<Report, Error> {
    let channel = rara_remote::router::lazy_channel_with(endpoint, &security)?;
    let mut suite = Suite { endpoint: endpoint.to_owned(), channel, security, findings: Findings::default() };
    suite.run().await;
    Ok(suite.findings.into_report(endpoint))
}
