//! The handler logic of the two functions, shared by the Lambdas (`functions/`) and the
//! local runners (`rara scheduler`, `rara executor`), so both run the same code.
//!
//! # Layout
//!
//! - [`settings`]: the typed settings of the scheduler and the executor (`RARA_*`).
//! - [`timeouts`]: deadlines on every outside call (SQS, Secrets Manager, Postgres) and
//!   the grace a stopping runner gives what it holds.
//! - [`burst`]: transient errors of an outside call logged once per burst, naming the peer.
//! - [`scheduler`]: reap expired leases, lease due steps, send their messages, release
//!   the leases whose messages could not be sent.
//! - [`batch`]: the executor's batch: parse, claim in one statement, run concurrently,
//!   record outcomes in micro-batches (`batch/record.rs`), decide each message's fate.
//! - [`fate`]: a message's fate as a value: the batch report lists what was acknowledged
//!   (everything else comes back), and the pure planning of outcomes.
//! - [`execution`]: one claimed step: routing, deadline, cancellation, heartbeats, panics,
//!   and parking a detachable remote attempt at the invocation's end.
//! - [`cancel`]: an operator's cancel of a run or a step, reaching detached attempts at once.
//! - [`secrets`]: `{"$secret": "name"}` references resolved just before a step runs
//!   (environment, files or Secrets Manager), and the redaction of what the step returns.
//! - [`reporter`]: progress and artifacts written to Postgres, fenced and throttled.
//! - [`telemetry`]: OpenTelemetry (one trace per run, OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT`
//!   is set, off otherwise) and the JSON log lines, flushed before each invocation returns.
//! - [`metrics`]: counters printed as CloudWatch embedded-metric log lines.
//! - [`runner`]: the local SQS poller that drives the executor batch as Lambda's event
//!   source does.
//! - [`database`]: where the Postgres credentials come from: `DATABASE_URL`, or the
//!   Secrets Manager secret of `RARA_DATABASE_SECRET_ARN` (fetched once at init).
//! - [`wiring`]: what a function builds once at start (settings, pool, SQS client,
//!   registry), shared by the Lambdas' `main.rs` and the local runners.

pub mod batch;
pub mod burst;
pub mod cancel;
pub mod database;
pub mod execution;
pub mod fate;
pub mod metrics;
pub mod reporter;
pub mod runner;
pub mod scheduler;
pub mod secrets;
pub mod settings;
pub mod telemetry;
pub mod timeouts;
pub mod wiring;

/// The trace id of a `traceparent` (32 hex digits), for log lines.
pub fn trace_id(traceparent: &str) -> Option<String> {
    telemetry::parse_traceparent(traceparent).map(|c| c.trace_id().to_string())
}
