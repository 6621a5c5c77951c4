//! The plumbing the functions (`functions/`) and the CLI's runners wire in around the core
//! (`rara-runtime`): the AWS SDK, OTLP and EMF output, database credentials, and the local
//! SQS poller. The core knows ports; this crate holds the adapters and the start-up.
//!
//! # Layout
//!
//! - [`wiring`]: what a function builds once at start (settings, pool, SQS client, the
//!   executor's registry and secret resolver) and the logging init.
//! - [`aws`]: the SDK configuration of rara's timeouts, and the SQS and Secrets Manager
//!   clients built from it.
//! - [`call_log`]: the record of the AWS calls a process makes, for the IAM check (on when
//!   `RARA_AWS_CALL_LOG` is set).
//! - [`database`]: where the Postgres credentials come from: `DATABASE_URL`, or the
//!   Secrets Manager secret of `RARA_DATABASE_SECRET_ARN` (fetched once at init).
//! - [`secrets`]: the secret backends of `RARA_SECRETS_BACKEND` (environment and files,
//!   Secrets Manager) behind the core's resolver port.
//! - [`telemetry`]: the OTLP exporter (on when `OTEL_EXPORTER_OTLP_ENDPOINT` is set) and
//!   the JSON log lines, flushed before each invocation returns.
//! - [`metrics`]: the invocation's counters printed as CloudWatch embedded-metric lines.
//! - [`runner`]: the local SQS poller that drives the executor batch as Lambda's event
//!   source does.
//! - [`dlq`]: the dead-letter queue over SQS and the store (`rara dlq`, the console's `/dlq`),
//!   behind the operator's port.

pub mod aws;
pub mod call_log;
pub mod database;
pub mod dlq;
pub mod metrics;
pub mod runner;
pub mod secrets;
pub mod telemetry;
pub mod wiring;
