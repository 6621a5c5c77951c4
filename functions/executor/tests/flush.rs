//! The executor Lambda exports its spans before the invocation returns (a returned Lambda may
//! be frozen before the exporter's interval): the handler is invoked with a real message and
//! the spans are at a real OTLP receiver (`rara_testkit::otlp`, OTLP/gRPC here) the moment it
//! returns, long before the batch processor's 5 s interval. One test per binary: telemetry is
//! installed once per process.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::sqs::SqsEvent;
use lambda_runtime::{Context, LambdaEvent};
use rara_platform::telemetry::{self as platform_telemetry, Config, Protocol};
use rara_queue::Queue;
use rara_runtime::executor::BatchExecutor;
use rara_runtime::invocation::FunctionTimeout;
use rara_runtime::telemetry;
use rara_store::Store;
use rara_testkit::{OtlpReceiver, Queues, settings, submit};
use sqlx::PgPool;

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_handler_exports_its_spans_before_it_returns(pool: PgPool) {
    let receiver = OtlpReceiver::start().await;
    platform_telemetry::init("rara-executor", &Config::to(receiver.grpc_endpoint(), Protocol::Grpc)).unwrap();
    let store = Store::new(pool);
    let queues = Queues::new(30, 10).await;
    let settings = settings(&queues, &[]);
    let run_id = submit(&store, &settings, "name: one\nsteps:\n  - {name: a, operation: noop}\n").await;
    let registry = rara_runtime::registry::standard_registry(&settings).await.unwrap();
    let executor = BatchExecutor::new(store.clone(), queues.queue(), Arc::new(registry), &settings);
    let timeout = FunctionTimeout::executor(&settings);
    let scheduler = rara_runtime::scheduler::Scheduler::new(store.clone(), queues.queue(), Arc::new(settings));
    assert_eq!(scheduler.pass().await.unwrap().sent, 1);
    let message = queues.queue().receive(1, Duration::from_secs(2)).await.unwrap().remove(0);
    let traceparent = message.traceparent.clone().expect("the message carries the run's trace context");

    // The event as Lambda's SQS event source delivers it, attribute included.
    let payload: SqsEvent = serde_json::from_value(serde_json::json!({"Records": [{
        "messageId": "m-1",
        "receiptHandle": message.receipt_handle,
        "body": message.body,
        "attributes": {},
        "messageAttributes": {"traceparent": {"stringValue": traceparent, "dataType": "String"}},
        "eventSource": "aws:sqs",
    }]}))
    .unwrap();
    let mut context = Context::default();
    context.deadline = (std::time::SystemTime::now() + Duration::from_secs(20))
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let response =
        executor::handle(&executor, timeout, Duration::from_secs(2), LambdaEvent::new(payload, context)).await.unwrap();
    assert!(response.batch_item_failures.is_empty());

    // No waiting: what the handler did is at the receiver when it returns.
    let spans = receiver.spans();
    let trace_id = rara_runtime::trace_id(&traceparent).unwrap();
    let step_id = store.run(run_id).await.unwrap().steps[0].id;
    let attempt = telemetry::attempt_span_id(step_id, 1).to_string();
    let names: Vec<&str> =
        spans.iter().filter(|s| s.trace_id == trace_id && s.span_id == attempt).map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["rara.attempt"], "the attempt's span was exported before the handler returned: {spans:#?}");
    for name in ["rara.claim", "rara.execute", "rara.record"] {
        assert!(
            spans.iter().any(|s| s.name == name && s.parent_span_id == attempt),
            "{name} under the attempt: {spans:#?}"
        );
    }
}
