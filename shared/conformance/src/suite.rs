//! [`Suite`]: one run of the checks against one endpoint, with what they found, and the calls
//! every check makes (`Execute` with rara's deadline, `Cancel`).

use std::time::SystemTime;

use rara_remote::client::DEADLINE_GRACE;
use rara_remote::pb::executor_service_client::ExecutorServiceClient;
use rara_remote::pb::{self};
use tonic::transport::Channel;
use uuid::Uuid;

use crate::STREAM_BOUND;
use crate::rules::{Findings, Rule};
use crate::stream::Stream;

/// The endpoint under test and what the checks found so far.
pub(crate) struct Suite {
    pub(crate) endpoint: String,
    pub(crate) channel: Channel,
    pub(crate) findings: Findings,
}

impl Suite {
    pub(crate) fn client(&self) -> ExecutorServiceClient<Channel> {
        ExecutorServiceClient::new(self.channel.clone())
    }

    /// Opens `Execute` with rara's gRPC deadline (the request's deadline plus
    /// [`DEADLINE_GRACE`]); a call that cannot open violates `rule`.
    pub(crate) async fn execute(&mut self, rule: Rule, what: &str, request: pb::ExecuteRequest) -> Option<Stream> {
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

    /// `Cancel` of attempt 1 of `step_id`: `Ok(found)`, or what went wrong, said.
    pub(crate) async fn cancel(&self, step_id: &str, reason: &str) -> Result<bool, String> {
        let step = Uuid::parse_str(step_id).map_err(|e| e.to_string())?;
        rara_remote::cancel::cancel(self.client(), step, 1, reason, STREAM_BOUND)
            .await
            .map_err(|err| format!("Cancel was not answered: {err}"))
    }
}
