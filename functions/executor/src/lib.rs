//! The executor Lambda's handler: an SQS batch in, a partial batch response out (every message the
//! batch did not acknowledge is listed as a failure, so it comes back). The invocation's spans
//! are exported before it returns.

use std::time::Duration;

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use lambda_runtime::LambdaEvent;
use rara_platform::metrics::{EmfLine, EmfLines};
use rara_platform::wiring;
use rara_runtime::executor::{BatchExecutor, Record};
use rara_runtime::invocation::{self, FunctionTimeout};

/// Handles one SQS batch. Executions end `margin` before the invocation does: at the runtime's
/// deadline, or `timeout` from now when that deadline is unusable ([`invocation::remaining`]).
pub async fn handle(
    executor: &BatchExecutor,
    timeout: FunctionTimeout,
    margin: Duration,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, lambda_runtime::Error> {
    let deadline =
        tokio::time::Instant::now() + invocation::remaining(event.context.deadline, timeout).saturating_sub(margin);
    let records: Vec<Record> = event.payload.records.into_iter().map(record).collect();
    let report = executor.process(records, deadline).await;
    println!("{}", report.counters.emf_line("executor"));
    for line in report.operations.emf_lines("executor") {
        println!("{line}");
    }
    // A returned invocation may be frozen before the exporter's interval: export now.
    rara_platform::telemetry::flush().await;
    let mut response = SqsBatchResponse::default();
    for message_id in report.returned() {
        response.add_failure(message_id);
    }
    Ok(response)
}

/// One message of the event: its body, its attributes (`traceparent`, `rara_operations`) and
/// when it was sent.
fn record(m: SqsMessage) -> Record {
    let attribute = |name: &str| m.message_attributes.get(name).and_then(|a| a.string_value.clone());
    Record {
        traceparent: attribute(wiring::TRACEPARENT),
        operations: attribute(wiring::OPERATIONS),
        sent_at: first_sent(&m.attributes),
        message_id: m.message_id.unwrap_or_default(),
        receipt_handle: m.receipt_handle.unwrap_or_default(),
        body: m.body.unwrap_or_default(),
    }
}

/// When a message was sent (`SentTimestamp`, ms since the epoch), for its first delivery only
/// (`ApproximateReceiveCount` 1): a redelivered message's age counts its retry delays.
fn first_sent(attributes: &std::collections::HashMap<String, String>) -> Option<std::time::SystemTime> {
    if attributes.get("ApproximateReceiveCount").map(String::as_str) != Some("1") {
        return None;
    }
    let ms: u64 = attributes.get("SentTimestamp")?.parse().ok()?;
    Some(std::time::UNIX_EPOCH + Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_keeps_the_attributes_the_event_gives() {
        let event: SqsEvent = serde_json::from_value(serde_json::json!({"Records": [{
            "messageId": "m-1",
            "receiptHandle": "r-1",
            "body": "{}",
            "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1700000000000"},
            "messageAttributes": {
                "traceparent": {"stringValue": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "dataType": "String"},
                "rara_operations": {"stringValue": "sleep,noop", "dataType": "String"},
            },
        }, {"messageId": "m-2", "receiptHandle": "r-2", "body": "{}", "attributes": {}, "messageAttributes": {}}]}))
        .unwrap();
        let records: Vec<Record> = event.records.into_iter().map(record).collect();
        assert_eq!(records[0].operations.as_deref(), Some("sleep,noop"));
        assert!(records[0].traceparent.as_deref().is_some_and(|t| t.starts_with("00-0af7")));
        assert_eq!(records[0].sent_at, Some(std::time::UNIX_EPOCH + Duration::from_millis(1_700_000_000_000)));
        assert_eq!((records[1].operations.as_deref(), records[1].traceparent.as_deref()), (None, None));
        assert_eq!(records[1].message_id, "m-2");
    }
}
