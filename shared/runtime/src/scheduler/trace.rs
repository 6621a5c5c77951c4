//! The scheduler's part of a run's trace (DESIGN.md "Tracing"): each leased step's message
//! carries its run's context (the attempt's parent), and the lease and the send are spans
//! under the attempt (whose id the scheduler derives, as the executor does, from step id and
//! attempt). The runs' contexts come from one statement per lease round.

use std::collections::HashMap;
use std::time::SystemTime;

use opentelemetry::KeyValue;
use opentelemetry::trace::{SpanContext, SpanKind};
use rara_store::Store;
use rara_store::lease::Leased;
use rara_store::trace::LeaseTrace;
use uuid::Uuid;

use crate::telemetry::{self, SpanRecord};

/// The traces of one lease round's steps, by step id.
#[derive(Debug, Default)]
pub(super) struct RoundTrace {
    steps: HashMap<Uuid, (SpanContext, LeaseTrace)>,
}

impl RoundTrace {
    /// Reads the runs' contexts of `leased` (one statement, for at most `bound`). A failure
    /// only costs the round its spans: the messages then start fresh traces, and the steps
    /// run as always.
    pub(super) async fn read(store: &Store, leased: &[Leased], bound: std::time::Duration) -> Self {
        let ids: Vec<Uuid> = leased.iter().map(|l| l.step_id).collect();
        let traces = match crate::timeouts::db_call(bound, store.lease_traces(&ids)).await {
            Ok(traces) => traces,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the leased steps' traces; their messages start new ones");
                return RoundTrace::default();
            }
        };
        let steps = traces
            .into_iter()
            .filter_map(|t| {
                let run = telemetry::parse_traceparent(t.trace_context.as_deref()?)?;
                Some((t.step_id, (run, t)))
            })
            .collect();
        RoundTrace { steps }
    }

    /// The `traceparent` the message of `step_id` carries: its run's context (a fresh trace
    /// for a run without one).
    pub(super) fn traceparent(&self, step_id: Uuid) -> String {
        match self.steps.get(&step_id) {
            Some((run, _)) => telemetry::traceparent(run),
            None => telemetry::new_traceparent(None),
        }
    }

    /// The lease span (`lease`: the statement's times) and the send span (`send`: the SQS
    /// call's times, messaging conventions) of each step in `sent`, under its attempt.
    pub(super) fn emit(
        &self,
        sent: impl Iterator<Item = Uuid>,
        batch_size: usize,
        lease: (SystemTime, SystemTime),
        send: (SystemTime, SystemTime),
    ) {
        if !telemetry::enabled() {
            return;
        }
        for step_id in sent {
            let Some((run, t)) = self.steps.get(&step_id) else { continue };
            let attempt = telemetry::attempt_context(run, step_id, t.attempt);
            let attributes = telemetry::step_attributes(t.run_id, step_id, &t.operation, t.attempt, None);
            let mut span = SpanRecord::new("rara.lease", Some(attempt.clone()), lease.0, lease.1);
            span.attributes = attributes.clone();
            span.emit();
            let mut span = SpanRecord::new("send rara-steps", Some(attempt), send.0, send.1);
            span.kind = SpanKind::Producer;
            span.attributes = attributes;
            span.attributes.extend([
                KeyValue::new("messaging.system", "aws_sqs"),
                KeyValue::new("messaging.operation.type", "send"),
                KeyValue::new("messaging.operation.name", "SendMessageBatch"),
                KeyValue::new("messaging.batch.message_count", batch_size as i64),
            ]);
            span.emit();
        }
    }
}
