//! The step queue as a scenario sees it: its depth, and messages put on it straight away.

use std::time::{Duration, Instant};

use super::Stack;

impl Stack {
    pub async fn queue_depth(&self) -> u64 {
        use aws_sdk_sqs::types::QueueAttributeName as A;
        let names = [
            A::ApproximateNumberOfMessages,
            A::ApproximateNumberOfMessagesNotVisible,
            A::ApproximateNumberOfMessagesDelayed,
        ];
        let mut request = self.queues.client.get_queue_attributes().queue_url(&self.queues.url);
        for name in &names {
            request = request.attribute_names(name.clone());
        }
        let attributes = request.send().await.unwrap().attributes.unwrap_or_default();
        names.iter().map(|n| attributes.get(n).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)).sum()
    }

    /// Waits (bounded) until the queue is empty, runners still polling.
    pub async fn until_drained(&self, bound: Duration) {
        let end = Instant::now() + bound;
        while self.queue_depth().await > 0 && Instant::now() < end {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Puts `bodies` on the queue straight away (in one batch call per 10).
    pub async fn inject(&mut self, bodies: &[String]) {
        for chunk in bodies.chunks(10) {
            let entries = chunk
                .iter()
                .enumerate()
                .map(|(i, body)| {
                    aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .message_body(body)
                        .build()
                        .unwrap()
                })
                .collect::<Vec<_>>();
            let sent = self
                .queues
                .client
                .send_message_batch()
                .queue_url(&self.queues.url)
                .set_entries(Some(entries))
                .send()
                .await
                .unwrap();
            assert!(sent.failed.is_empty(), "injected messages failed: {:?}", sent.failed);
        }
        self.ledger.injected += bodies.len() as u64;
    }
}
