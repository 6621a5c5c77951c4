//! [`Suite`]: one run of the checks against one endpoint, with what they found, and the calls
//! every check makes (`Execute` with rara's deadline, `Cancel`).

use std::time::SystemTime;

use rara_remote::client::DEADLINE_GRACE;
use rara_remote::pb::{self};
use rara_remote::security::{Client, Security};
use tonic::transport::Channel;
use uuid::Uuid;

use crate::STREAM_BOUND;
use crate::rules::{Findings, Rule};
use crate::stream::Stream;

/// The endpoint under test and what the checks found so far.
pub(crate) struct Suite {
    pub(crate) endpoint: String,
    pub(crate) channel: Channel,
    /// The token every call carries and the key of the attempts' secrets (as rara's).
    pub(crate) security: Security,
    pub(crate) findings: Findings,
}

impl Suite {
    pub(crate) fn client(&self) -> Client {
        self.security.client(self.channel.clone())
    }

    /// The secret of attempt `attempt` of `step_id`, as rara derives it (empty for a
    /// malformed id).
    pub(crate) fn secret(&self, step_id: &str, attempt: u32) -> String {
        Uuid::parse_str(step_id).map(|step| self.security.attempt_secret(step, attempt)).unwrap_or_default()
    }

    /// Opens `Execute` with rara's gRPC deadline (the request's deadline plus
    /// [`DEADLINE_GRACE`]); a call that cannot open violates `rule`.
    /// The request declares its attempt's secret unless it already carries one.
    pub(crate) async fn execute(&mut self, rule: Rule, what: &str, mut request: pb::ExecuteRequest) -> Option<Stream> {
        if request.attempt_secret.is_empty() {
            request.attempt_secret = self.secret(&request.step_id, request.attempt);
        }
        let timeout = request
            .deadline
            .and_then(|d| SystemTime::try_from(d).ok())
            .and_then(|d| d.duration_since(SystemTime::now()).ok())
            .unwrap_or_default()
            + DEADLINE_GRACE;
        let mut call = tonic::Request::new(request);
        call.set_timeout(timeout);
        match self.client().execute(call).await {
            Ok(events) => Some(Stream::new(what, 0, events.into_inner())),
            Err(status) => {
                self.findings
                    .violated(rule, format!("{what}: the call failed: {:?}: {}", status.code(), status.message()));
                None
            }
        }
    }

    /// `Cancel` of attempt 1 of `step_id` with its secret: `Ok(found)`, or what went wrong, said.
    pub(crate) async fn cancel(&self, step_id: &str, reason: &str) -> Result<bool, String> {
        self.cancel_presenting(step_id, &self.secret(step_id, 1), reason).await
    }

    /// `Cancel` of attempt 1 of `step_id` presenting `secret`.
    pub(crate) async fn cancel_presenting(&self, step_id: &str, secret: &str, reason: &str) -> Result<bool, String> {
        let step = Uuid::parse_str(step_id).map_err(|e| e.to_string())?;
        rara_remote::cancel::cancel(self.client(), (step, 1, secret), reason, STREAM_BOUND)
            .await
            .map_err(|err| format!("Cancel was not answered: {err}"))
    }
}
