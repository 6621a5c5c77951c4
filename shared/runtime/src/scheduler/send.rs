//! Sending a round's messages, given up when the cut fires; failed sends are logged once per
//! burst.

use rara_queue::Outgoing;
use tokio_util::sync::CancellationToken;

use super::Scheduler;

impl Scheduler {
    /// Sends `messages`; the ids of those not sent (all of them when the send failed or was
    /// given up at the cut), whose leases the caller releases.
    pub(super) async fn send(&self, messages: &[Outgoing], cut: &CancellationToken) -> Vec<String> {
        // A send that finished is recorded even when the cut fires with it (docs: "Who
        // decides an attempt's end").
        let sent = tokio::select! {
            biased;
            sent = self.queue.send(messages) => Some(sent),
            _ = cut.cancelled() => None,
        };
        match sent {
            Some(Ok(failed)) => {
                if let Ok(mut sends) = self.sends.lock() {
                    sends.succeeded();
                }
                failed
            }
            Some(Err(e)) => {
                // Logged once per burst (the leases are released each time).
                if let Ok(mut sends) = self.sends.lock() {
                    sends.failed(&format_args!("{e}; releasing the leases of the unsent messages"));
                }
                messages.iter().map(|m| m.id.clone()).collect()
            }
            None => {
                // Some may have been sent: releasing clears their tokens, so those messages
                // arrive stale and the steps are leased again with new ones.
                tracing::error!("sending step messages did not finish before the cut; releasing their leases");
                messages.iter().map(|m| m.id.clone()).collect()
            }
        }
    }
}
