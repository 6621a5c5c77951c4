//! [`Rule::Detach`] and [`Rule::AttachRefusals`], for a detachable `conformance.sleep`.

use std::time::{Duration, SystemTime};

use rara_remote::pb::execute_response::Event;
use rara_remote::pb::{self};
use rara_remote::protocol::Kind;
use serde_json::json;
use tonic::Code;
use uuid::Uuid;

use crate::attempt::request;
use crate::rules::Rule;
use crate::stream::{Stream, describe_terminal};
use crate::suite::Suite;
use crate::{SLEEP, STOP_BOUND, STREAM_BOUND};

impl Suite {
    /// [`Rule::Detach`] and [`Rule::AttachRefusals`] for a detachable `conformance.sleep`.
    pub(crate) async fn detach(&mut self) {
        const FENCE: i64 = 5;
        let what = format!("Execute {SLEEP} detachable, call dropped, then Attach");
        let mut request =
            request(SLEEP, "", &json!({"seconds": 60}).to_string(), Some(SystemTime::now() + Duration::from_secs(60)));
        request.detachable = true;
        request.fence = FENCE;
        let step_id = request.step_id.clone();
        let Some(mut stream) = self.execute(Rule::Detach, &what, request).await else { return };
        if !stream.read_until(STREAM_BOUND, |s| s.running_version().is_some() && s.count(Kind::Progress) > 0).await {
            self.findings.violated(Rule::Detach, format!("{what}: no running and progress ({})", stream.kinds()));
            return;
        }
        self.check_stream(&stream);
        let after = stream.events.last().map_or(0, |e| e.sequence);
        drop(stream);
        tokio::time::sleep(Duration::from_millis(500)).await;

        let refusals = [
            (Uuid::new_v4().to_string(), FENCE, Code::NotFound, "an attempt the executor never saw"),
            (step_id.clone(), FENCE - 1, Code::FailedPrecondition, "an older fence"),
        ];
        for (step, fence, expected, case) in refusals {
            let outcome = match self.attach(&step, fence, after).await {
                Ok(_) => Err(format!("Attach with {case} was accepted; expected {expected:?}")),
                Err(status) if status.code() == expected => Ok(()),
                Err(status) => Err(format!("Attach with {case} answered {:?}; expected {expected:?}", status.code())),
            };
            self.findings.record(Rule::AttachRefusals, outcome);
        }

        let mut attached = match self.attach(&step_id, FENCE, after).await {
            Ok(events) => Stream::new(&format!("Attach after sequence {after}"), after, events),
            Err(status) => {
                let what = format!("{what}: Attach failed: {:?}: {}", status.code(), status.message());
                self.findings.violated(Rule::Detach, what);
                return;
            }
        };
        if !attached.read_until(STREAM_BOUND, |s| !s.events.is_empty()).await {
            self.findings.violated(Rule::Detach, format!("{what}: no event after re-attaching; {}", attached.ending()));
        }
        let reason = "conformance: detach".to_owned();
        match self.cancel(&step_id, &reason).await {
            Ok(true) => {}
            Ok(false) => self
                .findings
                .violated(Rule::Detach, format!("{what}: Cancel of the detached attempt answered found=false")),
            Err(err) => self.findings.violated(Rule::Detach, format!("{what}: {err}")),
        }
        attached.read_to_end(STOP_BOUND).await;
        self.check_stream(&attached);
        let outcome = match attached.terminal() {
            Some(Event::Cancelled(c)) if c.reason == reason => Ok(()),
            _ => Err(format!(
                "{what}: the attached stream ended with {} after Cancel, not cancelled with its reason",
                describe_terminal(&attached)
            )),
        };
        self.findings.record(Rule::Detach, outcome);
    }

    pub(crate) async fn attach(
        &self,
        step_id: &str,
        fence: i64,
        after: u64,
    ) -> Result<tonic::Streaming<pb::ExecuteResponse>, tonic::Status> {
        let request = pb::AttachRequest {
            step_id: step_id.to_owned(),
            attempt: 1,
            fence,
            after_sequence: after,
            attempt_secret: self.secret(step_id, 1),
            ..Default::default()
        };
        let mut call = tonic::Request::new(request);
        call.set_timeout(Duration::from_secs(60));
        self.client().attach(call).await.map(tonic::Response::into_inner)
    }
}
