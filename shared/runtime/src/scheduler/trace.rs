//! The scheduler's part of a run's trace (DESIGN.md "Tracing"): each leased step's message
//! carries its run's context (the attempt's parent), and the lease and the send are spans
//! under the attempt (whose id the scheduler derives, as the executor does, from step id and
//! attempt). The runs' contexts come with the lease itself.

use std::collections::HashMap;
use std::time::SystemTime;

use opentelemetry::KeyValue;
use opentelemetry::trace::{SpanContext, SpanKind};
use rara_store::lease::Leased;
use rara_store::waits::EndedWait;
use uuid::Uuid;

use crate::telemetry::{self, SpanRecord};

/// The traces of one lease round's steps, by step id.
#[derive(Debug)]
pub(super) struct RoundTrace<'a> {
    steps: HashMap<Uuid, (SpanContext, &'a Leased)>,
}

impl<'a> RoundTrace<'a> {
    /// The runs' contexts of `leased`, which the lease returned with them.
    pub(super) fn of(leased: &'a [Leased]) -> Self {
        let steps = leased
            .iter()
            .filter_map(|l| {
                let run = telemetry::parse_traceparent(l.trace_context.as_deref()?)?;
                Some((l.step_id, (run, l)))
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

/// The spans of waits that ended (forgotten by the wait round, whoever decided them): the
/// wait's attempt (`rara.attempt`, its derived id, under the run's root: no executor ends it)
/// and under it `rara.wait`, from when it began to when it was decided. Ids, the wait's kind
/// and name, and what decided it; never a payload.
pub(super) fn emit_waits(ended: &[EndedWait]) {
    if !telemetry::enabled() {
        return;
    }
    for wait in ended {
        let Some(run) = wait.trace_context.as_deref().and_then(telemetry::parse_traceparent) else { continue };
        let attempt = telemetry::attempt_context(&run, wait.step_id, wait.attempt);
        let (start, end) = (SystemTime::from(wait.started_at), SystemTime::from(wait.decided_at));
        let outcome = if wait.failed { "failed" } else { "succeeded" };
        let mut attributes =
            telemetry::step_attributes(wait.run_id, wait.step_id, &format!("wait.{}", wait.kind), wait.attempt, None);
        attributes.push(KeyValue::new("rara.outcome", outcome));
        let mut span = SpanRecord::new("rara.attempt", Some(run), start, end);
        span.ids = Some((attempt.trace_id(), attempt.span_id()));
        span.attributes = attributes.clone();
        span.emit();
        let mut span = SpanRecord::new("rara.wait", Some(attempt), start, end);
        span.attributes = attributes;
        span.attributes.push(KeyValue::new("rara.wait.kind", wait.kind.clone()));
        span.attributes.extend(wait.name.clone().map(|n| KeyValue::new("rara.wait.name", n)));
        span.attributes.push(KeyValue::new("rara.wait.decided_by", decider(&wait.decided_by)));
        span.emit();
    }
}

/// What decided a wait, without the id a signal or an event carried (`signal s1` → `signal`,
/// `completion token` → `token`; `timer`, `timeout`, `cancelled` as they are).
fn decider(by: &str) -> String {
    match by.split(' ').next().unwrap_or_default() {
        "completion" => "token".to_owned(),
        first => first.to_owned(),
    }
}
