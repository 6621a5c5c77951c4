//! [`Rule::Heartbeat`]: a quiet stream sends heartbeats when asked, outside the order.

use rara_remote::pb::execute_response::Event;
use serde_json::json;

use crate::attempt::{in_a_while, request};
use crate::rules::Rule;
use crate::stream::describe_terminal;
use crate::suite::Suite;
use crate::{HEARTBEAT_ASKED_MS, SLEEP, STREAM_BOUND};

impl Suite {
    /// [`Rule::Heartbeat`]: a second of `conformance.sleep` (progress every 200–250 ms) with a
    /// heartbeat asked every 50 ms.
    pub(crate) async fn heartbeat(&mut self) {
        let what = format!("Execute {SLEEP} for 1 s with heartbeat_interval_ms {HEARTBEAT_ASKED_MS}");
        let mut request = request(SLEEP, "", &json!({"seconds": 1}).to_string(), in_a_while());
        request.heartbeat_interval_ms = HEARTBEAT_ASKED_MS;
        let Some(mut stream) = self.execute(Rule::Heartbeat, &what, request).await else { return };
        stream.read_to_end(STREAM_BOUND).await;
        self.check_stream(&stream);
        let outcome = if stream.heartbeats.is_empty() {
            Err(format!("{what}: no heartbeat in the quiet stretches between progress reports; {}", stream.ending()))
        } else if let Some(h) = stream.heartbeats.iter().find(|h| h.sequence != 0) {
            Err(format!("{what}: a heartbeat carried sequence {}, expected 0", h.sequence))
        } else if !matches!(stream.terminal(), Some(Event::Succeeded(_))) {
            Err(format!("{what}: ended with {}, expected succeeded", describe_terminal(&stream)))
        } else {
            Ok(())
        };
        self.findings.record(Rule::Heartbeat, outcome);
    }
}
