//! The core logic of the two functions, shared by the Lambdas (`functions/`) and the local
//! runners (`rara scheduler`, `rara executor`), so both run the same code. It knows ports (the
//! queue, the store, the secret resolver, the OpenTelemetry API), never an SDK: the AWS,
//! OTLP, EMF and process plumbing is `rara-platform`'s.
//!
//! # Layout
//!
//! - [`executor`]: the executor's batch, a message's fate, one execution, its reporter and
//!   the holder's cancel watch.
//! - [`scheduler`]: reap expired leases, lease due steps, send their messages, release the
//!   leases whose messages could not be sent; the maintenance beside the lease rounds.
//! - [`settings`]: the typed settings of the scheduler and the executor (`RARA_*`).
//! - [`timeouts`]: deadlines on every outside call (SQS, Secrets Manager, Postgres) and
//!   the grace a stopping runner gives what it holds.
//! - [`invocation`]: an invocation's time, from the runtime's deadline or the function's
//!   timeout.
//! - [`interrupt`]: a stopping runner's last calls, bounded.
//! - [`registry`]: the registry an executor runs with (built-ins and remote executors).
//! - [`grants`]: the claim's check of secret grants (workflow, operation, host), before resolution.
//! - [`pruned_objects`]: the artifact store's objects of pruned runs, deleted after their rows.
//! - [`secrets`]: `{"$secret": "name"}` references resolved through a port just before a
//!   step runs, and the redaction of what the step returns.
//! - [`telemetry`]: the spans of a run's trace (ids derived, `traceparent`s, spans emitted
//!   after the fact), through the OpenTelemetry API.
//! - [`metrics`]: what an invocation did ([`metrics::Counters`], figures per operation).
//! - [`burst`]: transient errors of an outside call logged once per burst, naming the peer.

pub mod burst;
pub mod executor;
pub mod grants;
pub mod interrupt;
pub mod invocation;
pub mod metrics;
pub mod pruned_objects;
pub mod registry;
pub mod scheduler;
pub mod secrets;
pub mod settings;
pub mod telemetry;
pub mod timeouts;

/// The trace id of a `traceparent` (32 hex digits), for log lines.
pub fn trace_id(traceparent: &str) -> Option<String> {
    telemetry::parse_traceparent(traceparent).map(|c| c.trace_id().to_string())
}
