//! The scheduler Lambda exports its spans before the invocation returns: the handler is invoked
//! with the committed scheduled event and the lease and send spans of the step it sent are at a
//! real OTLP receiver (`rara_testkit::otlp`, OTLP/HTTP here) the moment it returns, under the
//! attempt the message's run context and the step derive. One test per binary: telemetry is
//! installed once per process.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use rara_platform::telemetry::{self as platform_telemetry, Config, Protocol};
use rara_queue::Queue;
use rara_runtime::scheduler::Scheduler;
use rara_runtime::telemetry;
use rara_store::Store;
use rara_testkit::{OtlpReceiver, Queues, settings, submit};
use sqlx::PgPool;

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_handler_exports_its_spans_before_it_returns(pool: PgPool) {
    let receiver = OtlpReceiver::start().await;
    platform_telemetry::init("rara-scheduler", &Config::to(receiver.http_traces_url(), Protocol::HttpProtobuf))
        .unwrap();
    let store = Store::new(pool);
    let queues = Queues::new(30, 10).await;
    let settings = Arc::new(settings(&queues, &[]));
    let run_id = submit(&store, &settings, "name: one\nsteps:\n  - {name: a, operation: noop}\n").await;
    let scheduler = Scheduler::new(store.clone(), queues.queue(), settings);

    let counters =
        scheduler::handle(&scheduler, Duration::ZERO, Duration::from_secs(1), common::scheduled_event()).await.unwrap();
    assert_eq!(counters.sent, 1);

    // No waiting: the spans are at the receiver when the handler returns.
    let spans = receiver.spans();
    let run = store.run_trace(run_id).await.unwrap().unwrap();
    let message = queues.queue().receive(1, Duration::from_secs(2)).await.unwrap().remove(0);
    assert_eq!(message.traceparent.as_deref(), Some(run.as_str()), "the message carries the run's context");
    let run = telemetry::parse_traceparent(&run).unwrap();
    let step_id = store.run(run_id).await.unwrap().steps[0].id;
    let attempt = telemetry::attempt_span_id(step_id, 1).to_string();
    for name in ["rara.lease", "send rara-steps"] {
        let found: Vec<_> = spans.iter().filter(|s| s.name == name).collect();
        assert_eq!(found.len(), 1, "{name}: {spans:#?}");
        assert_eq!(
            (found[0].trace_id.clone(), found[0].parent_span_id.clone()),
            (run.trace_id().to_string(), attempt.clone())
        );
        assert_eq!(found[0].attribute("rara.step_id"), Some(&*step_id.to_string()));
    }
    let send = spans.iter().find(|s| s.name == "send rara-steps").unwrap();
    assert_eq!((send.kind, send.attribute("messaging.system")), (4, Some("aws_sqs")), "a producer span");
}
