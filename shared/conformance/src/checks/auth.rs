//! [`Rule::Authentication`] and [`Rule::AttemptSecret`].

use std::time::{Duration, SystemTime};

use rara_remote::Security;
use rara_remote::pb::execute_response::Event;
use rara_remote::pb::{self};
use rara_remote::protocol::Kind;
use serde_json::json;
use tonic::Code;
use uuid::Uuid;

use crate::attempt::request;
use crate::rules::Rule;
use crate::suite::Suite;
use crate::{SLEEP, STOP_BOUND, STREAM_BOUND};

/// A secret no attempt declared.
const WRONG: &str = "0000000000000000000000000000000000000000000000000000000000000000";

impl Suite {
    /// [`Rule::Authentication`]: each RPC without the token is UNAUTHENTICATED (skipped when
    /// the suite has no token: the executor may run without one).
    pub(crate) async fn authentication(&mut self) {
        if !self.security.has_token() {
            self.findings.skipped(Rule::Authentication, "no token given (RARA_REMOTE_TOKEN)");
            return;
        }
        let mut anonymous = Security::default().client(self.channel.clone());
        let step_id = Uuid::new_v4().to_string();
        let mut execute = request(SLEEP, "", &json!({"seconds": 1}).to_string(), crate::attempt::in_a_while());
        execute.step_id = step_id.clone();
        let attach = pb::AttachRequest { step_id: step_id.clone(), attempt: 1, fence: 1, ..Default::default() };
        let cancel = pb::CancelRequest { step_id, attempt: 1, ..Default::default() };
        let answers = [
            ("GetCapabilities", anonymous.get_capabilities(pb::GetCapabilitiesRequest {}).await.err()),
            ("Execute", anonymous.execute(execute).await.err()),
            ("Attach", anonymous.attach(attach).await.err()),
            ("Cancel", anonymous.cancel(cancel).await.err()),
        ];
        for (rpc, status) in answers {
            let outcome = match status {
                Some(status) if status.code() == Code::Unauthenticated => Ok(()),
                Some(status) => {
                    Err(format!("{rpc} without the token answered {:?}, not Unauthenticated", status.code()))
                }
                None => Err(format!("{rpc} without the token was accepted")),
            };
            self.findings.record(Rule::Authentication, outcome);
        }
    }

    /// [`Rule::AttemptSecret`] on a running `conformance.sleep` (detachable when it can be,
    /// so `Attach` is checked too).
    pub(crate) async fn attempt_secret(&mut self, detachable: bool) {
        const FENCE: i64 = 7;
        let what = format!("Execute {SLEEP}, then calls without its secret");
        let deadline = Some(SystemTime::now() + Duration::from_secs(60));
        let mut legit = request(SLEEP, "", &json!({"seconds": 60}).to_string(), deadline);
        (legit.fence, legit.detachable) = (FENCE, detachable);
        let step_id = legit.step_id.clone();
        let Some(mut stream) = self.execute(Rule::AttemptSecret, &what, legit).await else { return };
        if !stream.read_until(STREAM_BOUND, |s| s.count(Kind::Progress) > 0).await {
            self.findings.violated(Rule::AttemptSecret, format!("{what}: no progress ({})", stream.kinds()));
            return;
        }
        let outcome = match self.cancel_presenting(&step_id, WRONG, "conformance: forged").await {
            Err(err) if err.contains("PermissionDenied") => Ok(()),
            other => Err(format!("{what}: Cancel with another secret answered {other:?}, not PermissionDenied")),
        };
        self.findings.record(Rule::AttemptSecret, outcome);
        if detachable {
            let mut attach =
                pb::AttachRequest { step_id: step_id.clone(), attempt: 1, fence: FENCE, ..Default::default() };
            attach.attempt_secret = WRONG.to_owned();
            let outcome = match self.client().attach(attach).await {
                Err(status) if status.code() == Code::PermissionDenied => Ok(()),
                Err(status) => Err(format!("{what}: Attach with another secret answered {:?}", status.code())),
                Ok(_) => Err(format!("{what}: Attach with another secret was accepted")),
            };
            self.findings.record(Rule::AttemptSecret, outcome);
        }
        // A larger fence for the same step, vouching for nothing.
        let mut forged = request(SLEEP, "", &json!({"seconds": 60}).to_string(), deadline);
        (forged.step_id, forged.attempt, forged.fence) = (step_id.clone(), 2, FENCE + 1_000_000);
        (forged.attempt_secret, forged.prior_attempt_secrets) = ("f".repeat(64), vec![WRONG.to_owned()]);
        let forged_stream = self.execute(Rule::AttemptSecret, "a forged Execute", forged).await;
        let before = stream.count(Kind::Progress);
        let alive = stream.read_until(Duration::from_secs(2), |s| s.count(Kind::Progress) > before).await;
        let outcome = match alive && stream.terminal().is_none() {
            true => Ok(()),
            false => Err(format!("{what}: a forged Execute with a larger fence stopped it ({})", stream.kinds())),
        };
        self.findings.record(Rule::AttemptSecret, outcome);
        drop(forged_stream);
        let reason = "conformance: attempt-secret".to_owned();
        let outcome = match self.cancel(&step_id, &reason).await {
            Ok(true) => {
                stream.read_to_end(STOP_BOUND).await;
                match stream.terminal() {
                    Some(Event::Cancelled(c)) if c.reason == reason => Ok(()),
                    _ => Err(format!("{what}: its own Cancel did not end it with cancelled ({})", stream.kinds())),
                }
            }
            other => Err(format!("{what}: Cancel with the attempt's secret answered {other:?}")),
        };
        self.findings.record(Rule::AttemptSecret, outcome);
    }
}
