//! Stopping an attempt: [`Rule::CancelRunning`], [`Rule::CancelChatty`],
//! [`Rule::CancelUnknown`] and [`Rule::CallCancellation`].

use std::time::{Duration, SystemTime};

use rara_remote::pb::execute_response::Event;
use rara_remote::protocol::Kind;
use serde_json::json;
use tokio::time::Instant;
use uuid::Uuid;

use crate::attempt::request;
use crate::rules::Rule;
use crate::suite::Suite;
use crate::{CALL_STOP_SETTLE, SLEEP, STOP_BOUND, STREAM_BOUND};

impl Suite {
    /// [`Rule::CancelRunning`] (or [`Rule::CancelChatty`]) and, once it ended, a second
    /// `Cancel` of the same attempt ([`Rule::CancelUnknown`]).
    pub(crate) async fn cancel_running(&mut self, operation: &str, rule: Rule) {
        let what = format!("Execute {operation} then Cancel");
        let request = request(
            operation,
            "",
            &json!({"seconds": 60}).to_string(),
            Some(SystemTime::now() + Duration::from_secs(60)),
        );
        let step_id = request.step_id.clone();
        let Some(mut stream) = self.execute(rule, &what, request).await else { return };
        if !stream.read_until(STREAM_BOUND, |s| s.running_version().is_some() && s.count(Kind::Progress) > 0).await {
            self.findings.violated(
                rule,
                format!("{what}: no running and progress within {STREAM_BOUND:?} ({})", stream.kinds()),
            );
            self.check_stream(&stream);
            return;
        }
        let reason = format!("conformance: {rule}");
        match self.cancel(&step_id, &reason).await {
            Ok(true) => {}
            Ok(false) => {
                self.findings.violated(rule, format!("{what}: Cancel of the running attempt answered found=false"))
            }
            Err(err) => self.findings.violated(rule, format!("{what}: {err}")),
        }
        let cancelled_at = Instant::now();
        stream.read_to_end(STOP_BOUND).await;
        self.check_stream(&stream);
        let outcome = match stream.terminal() {
            Some(Event::Cancelled(c)) if c.reason == reason => Ok(()),
            Some(Event::Cancelled(c)) => {
                Err(format!("{what}: cancelled says {:?}, not the Cancel's reason {reason:?}", c.reason))
            }
            Some(_) => Err(format!("{what}: the stream ended with {} after Cancel, not cancelled", stream.kinds())),
            None => {
                Err(format!("{what}: no terminal event {:?} after Cancel ({})", cancelled_at.elapsed(), stream.kinds()))
            }
        };
        self.findings.record(rule, outcome);
        let outcome = match self.cancel(&step_id, "conformance: again").await {
            Ok(false) => Ok(()),
            Ok(true) => Err(format!("{what}: a second Cancel, after the attempt ended, answered found=true")),
            Err(err) => Err(format!("{what}: {err}")),
        };
        self.findings.record(Rule::CancelUnknown, outcome);
    }

    /// [`Rule::CancelUnknown`] for an attempt the executor never saw.
    pub(crate) async fn cancel_unknown(&mut self) {
        let outcome = match self.cancel(&Uuid::new_v4().to_string(), "conformance: unknown").await {
            Ok(false) => Ok(()),
            Ok(true) => Err("Cancel of an attempt the executor never saw answered found=true".to_owned()),
            Err(err) => Err(err),
        };
        self.findings.record(Rule::CancelUnknown, outcome);
    }

    /// [`Rule::CallCancellation`]: the client goes away from a running, non-detachable attempt.
    pub(crate) async fn call_cancellation(&mut self) {
        let what = format!("Execute {SLEEP}, then the call dropped");
        let request =
            request(SLEEP, "", &json!({"seconds": 60}).to_string(), Some(SystemTime::now() + Duration::from_secs(60)));
        let step_id = request.step_id.clone();
        let Some(mut stream) = self.execute(Rule::CallCancellation, &what, request).await else { return };
        if !stream.read_until(STREAM_BOUND, |s| s.running_version().is_some()).await {
            self.findings.violated(Rule::CallCancellation, format!("{what}: no running event ({})", stream.kinds()));
            return;
        }
        self.check_stream(&stream);
        drop(stream);
        tokio::time::sleep(CALL_STOP_SETTLE).await;
        let outcome = match self.cancel(&step_id, "conformance: after the call was dropped").await {
            Ok(false) => Ok(()),
            Ok(true) => Err(format!(
                "{what}: the attempt still ran {CALL_STOP_SETTLE:?} after its call was cancelled (Cancel found it)"
            )),
            Err(err) => Err(format!("{what}: {err}")),
        };
        self.findings.record(Rule::CallCancellation, outcome);
    }
}
