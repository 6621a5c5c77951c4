//! A queue wrapper that counts every request (what SQS would bill) and, per executor, the
//! time from a non-empty receive to the delete of its batch (what Lambda would bill).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rara_queue::{Outgoing, Queue, Received};
use tokio::time::Instant;

/// When something happened to each step (or run), by id.
pub type Instants = Mutex<HashMap<uuid::Uuid, Instant>>;

/// Request counters shared by every wrapper of one run.
#[derive(Debug, Default)]
pub struct QueueStats {
    pub send_requests: AtomicU64,
    pub sent: AtomicU64,
    pub receive_requests: AtomicU64,
    pub empty_receives: AtomicU64,
    pub received: AtomicU64,
    pub delete_requests: AtomicU64,
    pub deleted: AtomicU64,
    /// Steps named by the deleted messages (more than `deleted` when a message names several).
    pub steps_deleted: AtomicU64,
    pub change_visibility: AtomicU64,
    pub batches: AtomicU64,
    pub batch_nanos: AtomicU64,
}

impl QueueStats {
    /// A counter per step of the run.
    pub fn per_step(counter: &AtomicU64, steps: u64) -> f64 {
        counter.load(Ordering::Relaxed) as f64 / steps.max(1) as f64
    }
}

/// The wrapper: one per loop (the scheduler's, each executor's), all sharing one [`QueueStats`].
pub struct Counted {
    inner: Arc<dyn Queue>,
    stats: Arc<QueueStats>,
    batch_started: Mutex<Option<Instant>>,
    /// When each step's message was first handed to the queue (the scheduler's side).
    sent_at: Option<Arc<Instants>>,
    /// The steps each received message names, by receipt handle, until it is deleted.
    steps: Mutex<HashMap<String, u64>>,
}

impl Counted {
    pub fn new(inner: Arc<dyn Queue>, stats: Arc<QueueStats>) -> Arc<Self> {
        Arc::new(Counted { inner, stats, batch_started: Mutex::new(None), sent_at: None, steps: Mutex::default() })
    }

    /// A queue that also records when each step's message was sent.
    pub fn recording(inner: Arc<dyn Queue>, stats: Arc<QueueStats>, sent_at: Arc<Instants>) -> Arc<Self> {
        Arc::new(Counted {
            inner,
            stats,
            batch_started: Mutex::new(None),
            sent_at: Some(sent_at),
            steps: Mutex::default(),
        })
    }
}

/// SQS requests for `n` messages in batches of 10.
fn requests(n: usize) -> u64 {
    n.div_ceil(10) as u64
}

#[async_trait::async_trait]
impl Queue for Counted {
    async fn send(&self, messages: &[Outgoing]) -> Result<Vec<String>, rara_queue::Error> {
        self.stats.send_requests.fetch_add(requests(messages.len()), Ordering::Relaxed);
        self.stats.sent.fetch_add(messages.len() as u64, Ordering::Relaxed);
        if let Some(sent_at) = &self.sent_at {
            let now = Instant::now();
            if let Ok(mut map) = sent_at.lock() {
                for m in messages {
                    for step in rara_queue::parse_steps(&m.body).unwrap_or_default() {
                        map.entry(step.message.step_id).or_insert(now);
                    }
                }
            }
        }
        self.inner.send(messages).await
    }

    async fn change_visibility(&self, receipt_handle: &str, timeout: Duration) -> Result<(), rara_queue::Error> {
        self.stats.change_visibility.fetch_add(1, Ordering::Relaxed);
        self.inner.change_visibility(receipt_handle, timeout).await
    }

    async fn receive(&self, max: u32, wait: Duration) -> Result<Vec<Received>, rara_queue::Error> {
        let got = self.inner.receive(max, wait).await?;
        self.stats.receive_requests.fetch_add(1, Ordering::Relaxed);
        if got.is_empty() {
            self.stats.empty_receives.fetch_add(1, Ordering::Relaxed);
        } else {
            self.stats.received.fetch_add(got.len() as u64, Ordering::Relaxed);
            if let Ok(mut steps) = self.steps.lock() {
                for m in &got {
                    let n = rara_queue::parse_steps(&m.body).map_or(1, |s| s.len() as u64);
                    steps.insert(m.receipt_handle.clone(), n);
                }
            }
            if let Ok(mut started) = self.batch_started.lock() {
                *started = Some(Instant::now());
            }
        }
        Ok(got)
    }

    async fn delete(&self, receipt_handles: &[String]) -> Result<Vec<String>, rara_queue::Error> {
        if let Some(started) = self.batch_started.lock().ok().and_then(|mut s| s.take()) {
            self.stats.batches.fetch_add(1, Ordering::Relaxed);
            self.stats.batch_nanos.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
        self.stats.delete_requests.fetch_add(requests(receipt_handles.len()), Ordering::Relaxed);
        let failed = self.inner.delete(receipt_handles).await?;
        self.stats.deleted.fetch_add((receipt_handles.len() - failed.len()) as u64, Ordering::Relaxed);
        if let Ok(mut steps) = self.steps.lock() {
            let deleted = receipt_handles.iter().filter(|h| !failed.contains(h));
            let n: u64 = deleted.map(|h| steps.remove(h).unwrap_or(1)).sum();
            self.stats.steps_deleted.fetch_add(n, Ordering::Relaxed);
        }
        Ok(failed)
    }

    async fn dead_letter(&self, body: &str, reason_code: &str, reason: &str) -> Result<(), rara_queue::Error> {
        self.inner.dead_letter(body, reason_code, reason).await
    }
}
