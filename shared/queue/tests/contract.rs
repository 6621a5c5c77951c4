//! One suite of queue behaviours, run against every implementation of the [`Queue`] port:
//! the in-memory queue and the SQS adapter on LocalStack (started by rara-testkit when
//! nothing answers). What the handlers rely on must hold for both, so a benchmark on the
//! in-memory queue exercises the same semantics as SQS.
//!
//! Queues are created with a 1-second visibility timeout and `maxReceiveCount` 2.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use rara_queue::memory::MemoryQueue;
use rara_queue::{Outgoing, Queue, Received};
use rara_testkit::Queues;

const VISIBILITY_SECONDS: u32 = 1;
const MAX_RECEIVE: u32 = 2;

/// A queue under test and a way to read its dead-letter queue.
enum Harness {
    Memory(Arc<MemoryQueue>),
    Sqs(Queues, Arc<dyn Queue>),
}

impl Harness {
    fn memory() -> Harness {
        Harness::Memory(Arc::new(MemoryQueue::new(Duration::from_secs(u64::from(VISIBILITY_SECONDS)), MAX_RECEIVE)))
    }

    async fn sqs() -> Harness {
        let queues = Queues::new(VISIBILITY_SECONDS, MAX_RECEIVE).await;
        let queue = queues.queue();
        Harness::Sqs(queues, queue)
    }

    fn queue(&self) -> &dyn Queue {
        match self {
            Harness::Memory(q) => q.as_ref(),
            Harness::Sqs(_, q) => q.as_ref(),
        }
    }

    /// (body, reason code) of the messages on the DLQ; waits a little for SQS's redrive.
    async fn dead_letters(&self, expected: usize) -> Vec<(String, Option<String>)> {
        match self {
            Harness::Memory(q) => q.dead_letters().into_iter().map(|d| (d.body, d.reason_code)).collect(),
            Harness::Sqs(queues, _) => {
                let mut all = Vec::new();
                for _ in 0..5 {
                    all.extend(queues.dead_letters().await);
                    if all.len() >= expected {
                        break;
                    }
                }
                all
            }
        }
    }
}

fn outgoing(bodies: &[&str]) -> Vec<Outgoing> {
    bodies.iter().enumerate().map(|(i, b)| Outgoing::new(i.to_string(), *b)).collect()
}

/// Receives until `count` messages arrived or `within` passed.
async fn receive_some(queue: &dyn Queue, count: usize, within: Duration) -> Vec<Received> {
    let end = tokio::time::Instant::now() + within;
    let mut got = Vec::new();
    while got.len() < count && tokio::time::Instant::now() < end {
        got.extend(queue.receive(10, Duration::from_secs(1)).await.unwrap());
    }
    got
}

async fn send_receive_delete(h: Harness) {
    let q = h.queue();
    assert!(q.send(&outgoing(&["a", "b", "c"])).await.unwrap().is_empty());
    let got = receive_some(q, 3, Duration::from_secs(5)).await;
    let mut bodies: Vec<&str> = got.iter().map(|m| m.body.as_str()).collect();
    bodies.sort_unstable();
    assert_eq!(bodies, ["a", "b", "c"]);
    assert!(got.iter().all(|m| m.receive_count == 1), "{got:?}");
    let receipts: Vec<String> = got.iter().map(|m| m.receipt_handle.clone()).collect();
    assert!(q.delete(&receipts).await.unwrap().is_empty());
    // Deleted messages never return, even after their visibility would have ended.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(q.receive(10, Duration::from_secs(1)).await.unwrap().is_empty());
}

/// Both attributes travel with their message, and a message without them arrives without.
async fn attributes_travel_with_their_message(h: Harness) {
    let q = h.queue();
    let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let mut messages = outgoing(&["said", "unsaid"]);
    messages[0].traceparent = Some(traceparent.to_owned());
    messages[0].operations = Some("sleep,http.request".to_owned());
    assert!(q.send(&messages).await.unwrap().is_empty());
    let mut got = receive_some(q, 2, Duration::from_secs(5)).await;
    got.sort_by(|a, b| a.body.cmp(&b.body));
    let seen: Vec<(&str, Option<&str>, Option<&str>)> =
        got.iter().map(|m| (m.body.as_str(), m.traceparent.as_deref(), m.operations.as_deref())).collect();
    assert_eq!(seen, [("said", Some(traceparent), Some("sleep,http.request")), ("unsaid", None, None)]);
}

async fn batches_hold_at_most_ten(h: Harness) {
    let q = h.queue();
    let bodies: Vec<String> = (0..15).map(|i| format!("m{i}")).collect();
    let refs: Vec<&str> = bodies.iter().map(String::as_str).collect();
    assert!(q.send(&outgoing(&refs)).await.unwrap().is_empty());
    let first = q.receive(10, Duration::from_secs(1)).await.unwrap();
    assert!(!first.is_empty() && first.len() <= 10, "{}", first.len());
    let rest = receive_some(q, 15 - first.len(), Duration::from_secs(5)).await;
    assert_eq!(first.len() + rest.len(), 15);
}

/// A send and a delete of many batches at once (the SQS adapter runs their batch requests
/// concurrently): every message arrives once, one delete call removes them all.
async fn many_batches_arrive_whole_and_delete_in_one_call(h: Harness) {
    let q = h.queue();
    let bodies: Vec<String> = (0..95).map(|i| format!("m{i}")).collect();
    let refs: Vec<&str> = bodies.iter().map(String::as_str).collect();
    assert!(q.send(&outgoing(&refs)).await.unwrap().is_empty());
    // By message id, the latest receipt: a message whose short visibility ended while the
    // others were received may come twice, as the same message.
    let mut latest: std::collections::BTreeMap<String, Received> = std::collections::BTreeMap::new();
    let end = tokio::time::Instant::now() + Duration::from_secs(10);
    while latest.len() < 95 && tokio::time::Instant::now() < end {
        for m in q.receive(10, Duration::from_secs(1)).await.unwrap() {
            latest.insert(m.message_id.clone(), m);
        }
    }
    let mut received: Vec<&str> = latest.values().map(|m| m.body.as_str()).collect();
    received.sort_unstable();
    let mut expected = refs.clone();
    expected.sort_unstable();
    assert_eq!(received, expected, "each body once, under one message id");
    let receipts: Vec<String> = latest.values().map(|m| m.receipt_handle.clone()).collect();
    assert!(q.delete(&receipts).await.unwrap().is_empty());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(q.receive(10, Duration::from_secs(1)).await.unwrap().is_empty());
}

async fn visibility_hides_then_returns(h: Harness) {
    let q = h.queue();
    q.send(&outgoing(&["hidden"])).await.unwrap();
    let first = receive_some(q, 1, Duration::from_secs(5)).await;
    assert_eq!(first.len(), 1);
    assert!(q.receive(10, Duration::ZERO).await.unwrap().is_empty(), "a received message is hidden");
    let again = receive_some(q, 1, Duration::from_secs(5)).await;
    assert_eq!(again.len(), 1, "the message returns after the visibility timeout");
    assert_eq!(again[0].body, "hidden");
    assert_eq!(again[0].message_id, first[0].message_id);
    assert_ne!(again[0].receipt_handle, first[0].receipt_handle, "every receive has its own receipt handle");
    assert_eq!(again[0].receive_count, 2, "the receive count increments");
}

async fn change_visibility_returns_early_or_hides_longer(h: Harness) {
    let q = h.queue();
    q.send(&outgoing(&["moved"])).await.unwrap();
    let first = receive_some(q, 1, Duration::from_secs(5)).await;
    assert_eq!(first.len(), 1);
    // Visibility 0: back at once.
    q.change_visibility(&first[0].receipt_handle, Duration::ZERO).await.unwrap();
    let again = receive_some(q, 1, Duration::from_secs(3)).await;
    assert_eq!(again.len(), 1, "visibility 0 returns the message at once");
    assert_eq!(again[0].receive_count, 2);
    // Longer than the queue's timeout: still hidden when the queue's timeout would have ended.
    q.change_visibility(&again[0].receipt_handle, Duration::from_secs(4)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(q.receive(10, Duration::ZERO).await.unwrap().is_empty(), "an extended visibility holds");
    assert!(q.delete(std::slice::from_ref(&again[0].receipt_handle)).await.unwrap().is_empty());
}

async fn a_delayed_send_arrives_after_its_delay(h: Harness) {
    let q = h.queue();
    let mut delayed = outgoing(&["later", "now"]);
    delayed[0].delay = Duration::from_secs(2);
    let sent = tokio::time::Instant::now();
    assert!(q.send(&delayed).await.unwrap().is_empty());
    let first = receive_some(q, 1, Duration::from_secs(5)).await;
    assert_eq!(first.iter().map(|m| m.body.as_str()).collect::<Vec<_>>(), ["now"], "the other is hidden");
    assert!(q.delete(std::slice::from_ref(&first[0].receipt_handle)).await.unwrap().is_empty());
    let later = receive_some(q, 1, Duration::from_secs(6)).await;
    assert_eq!(later.len(), 1, "the delayed message arrives");
    assert_eq!((later[0].body.as_str(), later[0].receive_count), ("later", 1));
    assert!(sent.elapsed() >= Duration::from_millis(1900), "after {:?}", sent.elapsed());
}

async fn redrives_to_the_dlq_after_max_receive_count(h: Harness) {
    let q = h.queue();
    q.send(&outgoing(&["poison"])).await.unwrap();
    for count in 1..=MAX_RECEIVE {
        let got = receive_some(q, 1, Duration::from_secs(5)).await;
        assert_eq!(got.len(), 1, "receive {count}");
        assert_eq!(got[0].receive_count, count);
        q.change_visibility(&got[0].receipt_handle, Duration::ZERO).await.unwrap();
    }
    // The next receive would exceed maxReceiveCount: the message moves to the DLQ instead.
    let got = receive_some(q, 1, Duration::from_secs(2)).await;
    assert!(got.is_empty(), "{got:?}");
    let dead = h.dead_letters(1).await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].0, "poison");
    assert_eq!(dead[0].1, None, "a redriven message carries no reason");
}

async fn dead_letter_keeps_the_reason(h: Harness) {
    let q = h.queue();
    q.dead_letter("not json", "MALFORMED_MESSAGE", "not valid JSON (line 1, column 1)").await.unwrap();
    let dead = h.dead_letters(1).await;
    assert_eq!(dead, [("not json".to_owned(), Some("MALFORMED_MESSAGE".to_owned()))]);
    assert!(q.receive(10, Duration::ZERO).await.unwrap().is_empty(), "the DLQ is not the step queue");
}

macro_rules! suite {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(super::Harness::memory()).await;
                }
            )*
        }
        mod sqs {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(super::Harness::sqs().await).await;
                }
            )*
        }
    };
}

suite!(
    send_receive_delete,
    attributes_travel_with_their_message,
    a_delayed_send_arrives_after_its_delay,
    batches_hold_at_most_ten,
    many_batches_arrive_whole_and_delete_in_one_call,
    visibility_hides_then_returns,
    change_visibility_returns_early_or_hides_longer,
    redrives_to_the_dlq_after_max_receive_count,
    dead_letter_keeps_the_reason,
);
