//! The SQS adapter. One client per container, built at start (`SqsQueue::from_env`).

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, MessageAttributeValue, MessageSystemAttributeName, SendMessageBatchRequestEntry,
};
use futures::StreamExt;

use crate::error::{Chain, Error};
use crate::port::{MAX_VISIBILITY, Outgoing, Queue, Received};

/// How many batch requests (`SendMessageBatch`, `DeleteMessageBatch`) of one call are under
/// way at once.
pub const BATCH_CONCURRENCY: usize = 10;
/// The attribute carrying the trace context from scheduler to executor.
pub const TRACEPARENT: &str = "traceparent";
/// Attributes set on a message moved to the DLQ by the executor.
pub const DLQ_REASON_CODE: &str = "rara_reason_code";
pub const DLQ_REASON: &str = "rara_reason";
/// Set on a DLQ copy whose body had to be cut to fit SQS's limit: the original's size in
/// bytes and its SHA-256 (hex), so an operator can tell what it was.
pub const DLQ_ORIGINAL_BYTES: &str = "rara_original_bytes";
pub const DLQ_ORIGINAL_SHA256: &str = "rara_original_sha256";
/// SQS's limit on one message: its body and its attributes (names, types, values) together.
pub const MAX_MESSAGE_BYTES: usize = 1024 * 1024;
/// Room kept for the attributes of a cut body beyond the reason's own.
const CUT_ATTRIBUTES_ROOM: usize = 256;

/// The body a DLQ copy can carry beside attributes of `attribute_bytes`: the whole body when
/// it fits, else its longest prefix that fits (at a character boundary) with the original's
/// size and digest.
fn dead_letter_body(body: &str, attribute_bytes: usize) -> (&str, Option<(usize, String)>) {
    if body.len() + attribute_bytes <= MAX_MESSAGE_BYTES {
        return (body, None);
    }
    let mut end = MAX_MESSAGE_BYTES.saturating_sub(attribute_bytes + CUT_ATTRIBUTES_ROOM).min(body.len());
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(body.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    (&body[..end], Some((body.len(), digest)))
}

/// What an attribute counts against the message limit.
fn attribute_bytes(name: &str, value: &str) -> usize {
    name.len() + "String".len() + value.len()
}

#[derive(Debug, Clone)]
pub struct SqsQueue {
    client: Client,
    queue_url: String,
    dlq_url: Option<String>,
}

fn string_attribute(value: &str) -> Result<MessageAttributeValue, Error> {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
        .map_err(|e| Error::sqs("build attribute", e))
}

/// The batch requests of one call (one per ten items, SQS's limit), up to
/// [`BATCH_CONCURRENCY`] of them under way at once: a lease round of 1,000 messages waits
/// about ten round trips to SQS, not a hundred. What failed, of all of them; the first error
/// of a request that failed as a whole.
async fn concurrently(requests: Vec<impl Future<Output = Result<Vec<String>, Error>>>) -> Result<Vec<String>, Error> {
    let results: Vec<_> = futures::stream::iter(requests).buffer_unordered(BATCH_CONCURRENCY).collect().await;
    let mut failed = Vec::new();
    for result in results {
        failed.extend(result?);
    }
    Ok(failed)
}

impl SqsQueue {
    pub fn new(client: Client, queue_url: impl Into<String>, dlq_url: Option<String>) -> Self {
        SqsQueue { client, queue_url: queue_url.into(), dlq_url }
    }

    /// A client from the SDK's standard environment (region, credentials, `AWS_ENDPOINT_URL`).
    pub async fn client_from_env() -> Client {
        let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        Client::new(&config)
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn queue_url(&self) -> &str {
        &self.queue_url
    }

    /// One `SendMessageBatch` of at most ten messages; the ids of those that failed (all of
    /// them when the request failed as a whole).
    async fn send_batch(&self, chunk: &[Outgoing]) -> Result<Vec<String>, Error> {
        let mut entries = Vec::with_capacity(chunk.len());
        for m in chunk {
            let mut entry = SendMessageBatchRequestEntry::builder().id(&m.id).message_body(&m.body);
            if let Some(tp) = &m.traceparent {
                entry = entry.message_attributes(TRACEPARENT, string_attribute(tp)?);
            }
            if let Some(operations) = &m.operations {
                entry = entry.message_attributes(crate::operations::OPERATIONS, string_attribute(operations)?);
            }
            if !m.delay.is_zero() {
                entry = entry.delay_seconds(m.delay.min(crate::port::MAX_SEND_DELAY).as_secs_f64().ceil() as i32);
            }
            entries.push(entry.build().map_err(|e| Error::sqs("build entry", e))?);
        }
        Ok(match self.client.send_message_batch().queue_url(&self.queue_url).set_entries(Some(entries)).send().await {
            Ok(out) => out.failed().iter().map(|f| f.id().to_owned()).collect(),
            Err(e) => {
                let error = Error::sqs("SendMessageBatch", e);
                tracing::warn!(error = %Chain(&error), "a send batch failed as a whole");
                chunk.iter().map(|m| m.id.clone()).collect()
            }
        })
    }

    /// One `DeleteMessageBatch` of at most ten receipt handles; those that failed.
    async fn delete_batch(&self, chunk: &[String]) -> Result<Vec<String>, Error> {
        let entries = chunk
            .iter()
            .enumerate()
            .map(|(i, r)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(r)
                    .build()
                    .map_err(|e| Error::sqs("build entry", e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let out = self
            .client
            .delete_message_batch()
            .queue_url(&self.queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| Error::sqs("DeleteMessageBatch", e))?;
        Ok(out
            .failed()
            .iter()
            .filter_map(|f| f.id().parse::<usize>().ok().and_then(|i| chunk.get(i)).cloned())
            .collect())
    }

    /// Like [`Queue::receive`], with every string message attribute (e.g. the DLQ reason).
    pub async fn receive_with_attributes(
        &self,
        max: u32,
        wait: Duration,
    ) -> Result<Vec<(Received, HashMap<String, String>)>, Error> {
        self.receive_inner(max, wait, &["All"]).await
    }

    async fn receive_inner(
        &self,
        max: u32,
        wait: Duration,
        attributes: &[&str],
    ) -> Result<Vec<(Received, HashMap<String, String>)>, Error> {
        let wait = wait.min(Duration::from_secs(20));
        let mut request = self
            .client
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(max.clamp(1, 10) as i32)
            .wait_time_seconds(wait.as_secs() as i32)
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .set_message_attribute_names(Some(attributes.iter().map(|a| (*a).to_owned()).collect()))
            .customize();
        // A long poll may rightly take its whole wait: it gets the wait on top of the client's
        // attempt and operation timeouts (the rest of the client's timeouts as they are).
        if let Some(t) = self.client.config().timeout_config()
            && (t.operation_attempt_timeout().is_some() || t.operation_timeout().is_some())
        {
            let mut timeouts = aws_sdk_sqs::config::timeout::TimeoutConfig::builder();
            if let Some(connect) = t.connect_timeout() {
                timeouts = timeouts.connect_timeout(connect);
            }
            if let Some(attempt) = t.operation_attempt_timeout() {
                timeouts = timeouts.operation_attempt_timeout(attempt + wait);
            }
            if let Some(operation) = t.operation_timeout() {
                timeouts = timeouts.operation_timeout(operation + wait);
            }
            request = request.config_override(aws_sdk_sqs::config::Builder::default().timeout_config(timeouts.build()));
        }
        let out = request.send().await.map_err(|e| Error::sqs("ReceiveMessage", e))?;
        Ok(out
            .messages()
            .iter()
            .map(|m| {
                let attributes: HashMap<String, String> = m
                    .message_attributes()
                    .map(|a| a.iter().filter_map(|(k, v)| Some((k.clone(), v.string_value()?.to_owned()))).collect())
                    .unwrap_or_default();
                let received = Received {
                    message_id: m.message_id().unwrap_or_default().to_owned(),
                    receipt_handle: m.receipt_handle().unwrap_or_default().to_owned(),
                    body: m.body().unwrap_or_default().to_owned(),
                    receive_count: m
                        .attributes()
                        .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                        .and_then(|c| c.parse().ok())
                        .unwrap_or(1),
                    traceparent: attributes.get(TRACEPARENT).cloned(),
                    operations: attributes.get(crate::operations::OPERATIONS).cloned(),
                };
                (received, attributes)
            })
            .collect())
    }
}

#[async_trait::async_trait]
impl Queue for SqsQueue {
    fn peer(&self) -> String {
        self.queue_url.clone()
    }

    async fn send(&self, messages: &[Outgoing]) -> Result<Vec<String>, Error> {
        // Collected first: a closure inside the stream would make the future not `Send`
        // for async_trait (rust-lang/rust#64552).
        concurrently(messages.chunks(10).map(|chunk| self.send_batch(chunk)).collect()).await
    }

    async fn change_visibility(&self, receipt_handle: &str, timeout: Duration) -> Result<(), Error> {
        let seconds = timeout.min(MAX_VISIBILITY).as_secs_f64().ceil() as i32;
        self.client
            .change_message_visibility()
            .queue_url(&self.queue_url)
            .receipt_handle(receipt_handle)
            .visibility_timeout(seconds)
            .send()
            .await
            .map_err(|e| Error::sqs("ChangeMessageVisibility", e))?;
        Ok(())
    }

    async fn receive(&self, max: u32, wait: Duration) -> Result<Vec<Received>, Error> {
        Ok(self
            .receive_inner(max, wait, &[TRACEPARENT, crate::operations::OPERATIONS])
            .await?
            .into_iter()
            .map(|(m, _)| m)
            .collect())
    }

    async fn delete(&self, receipt_handles: &[String]) -> Result<Vec<String>, Error> {
        concurrently(receipt_handles.chunks(10).map(|chunk| self.delete_batch(chunk)).collect()).await
    }

    async fn dead_letter(&self, body: &str, reason_code: &str, reason: &str) -> Result<(), Error> {
        let dlq =
            self.dlq_url.as_deref().ok_or_else(|| Error::Config("no dead-letter queue URL (RARA_DLQ_URL)".into()))?;
        let attributes = attribute_bytes(DLQ_REASON_CODE, reason_code) + attribute_bytes(DLQ_REASON, reason);
        let (body, cut) = dead_letter_body(body, attributes);
        let mut request = self
            .client
            .send_message()
            .queue_url(dlq)
            .message_body(if body.is_empty() { "<empty>" } else { body })
            .message_attributes(DLQ_REASON_CODE, string_attribute(reason_code)?)
            .message_attributes(DLQ_REASON, string_attribute(reason)?);
        if let Some((bytes, digest)) = cut {
            request = request
                .message_attributes(DLQ_ORIGINAL_BYTES, string_attribute(&bytes.to_string())?)
                .message_attributes(DLQ_ORIGINAL_SHA256, string_attribute(&digest)?);
        }
        request.send().await.map_err(|e| Error::sqs("SendMessage (DLQ)", e))?;
        Ok(())
    }
}

/// The URLs of a step queue and its dead-letter queue.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct QueuePair {
    pub queue_url: String,
    pub dlq_url: String,
}

/// Creates (or finds: SQS `CreateQueue` is idempotent for equal attributes) the queue
/// `name` and its DLQ `name-dlq`, with the visibility timeout and the redrive policy's
/// `maxReceiveCount` given (they must match the functions' alignment settings).
pub async fn create_queue_pair(
    client: &Client,
    name: &str,
    visibility: Duration,
    max_receive_count: u32,
) -> Result<QueuePair, Error> {
    use aws_sdk_sqs::types::QueueAttributeName;
    let dlq_url = client
        .create_queue()
        .queue_name(format!("{name}-dlq"))
        .attributes(QueueAttributeName::MessageRetentionPeriod, (14 * 24 * 3600).to_string())
        .send()
        .await
        .map_err(|e| Error::sqs("CreateQueue (DLQ)", e))?
        .queue_url
        .ok_or_else(|| Error::Config("CreateQueue returned no DLQ URL".into()))?;
    let dlq_arn = client
        .get_queue_attributes()
        .queue_url(&dlq_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| Error::sqs("GetQueueAttributes", e))?
        .attributes
        .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
        .ok_or_else(|| Error::Config("the DLQ has no ARN".into()))?;
    let queue_url = client
        .create_queue()
        .queue_name(name)
        .attributes(QueueAttributeName::VisibilityTimeout, visibility.as_secs().to_string())
        .attributes(
            QueueAttributeName::RedrivePolicy,
            format!(r#"{{"deadLetterTargetArn":"{dlq_arn}","maxReceiveCount":"{max_receive_count}"}}"#),
        )
        .send()
        .await
        .map_err(|e| Error::sqs("CreateQueue", e))?
        .queue_url
        .ok_or_else(|| Error::Config("CreateQueue returned no queue URL".into()))?;
    Ok(QueuePair { queue_url, dlq_url })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_that_fits_travels_whole_and_one_that_does_not_is_cut_with_its_size_and_digest() {
        assert_eq!(dead_letter_body("abc", 100), ("abc", None));
        let big = "é".repeat(MAX_MESSAGE_BYTES / 2); // two bytes each: exactly the limit
        let (cut, original) = dead_letter_body(&big, 200);
        assert!(cut.len() + 200 + CUT_ATTRIBUTES_ROOM <= MAX_MESSAGE_BYTES && big.starts_with(cut));
        let (bytes, digest) = original.unwrap();
        assert_eq!((bytes, digest.len()), (MAX_MESSAGE_BYTES, 64));
    }
}
