//! Requests the executor cannot run: [`Rule::UnknownOperation`], [`Rule::UnknownVersion`],
//! [`Rule::InvalidInput`] and [`Rule::DeadlinePast`].

use std::time::{Duration, SystemTime};

use rara_domain::step_error::codes;

use crate::attempt::{in_a_while, request};
use crate::rules::Rule;
use crate::stream::{Stream, expect_failed};
use crate::suite::Suite;
use crate::{ECHO, STREAM_BOUND};

impl Suite {
    /// Requests the executor cannot run: each ends in order with the `failed` the proto says.
    pub(crate) async fn refusals(&mut self) {
        let past = Some(SystemTime::now() - Duration::from_secs(5));
        let cases = [
            (
                Rule::UnknownOperation,
                request("conformance.no-such-operation", "", "{}", in_a_while()),
                codes::UNKNOWN_OPERATION,
                false,
            ),
            (
                Rule::UnknownVersion,
                request(ECHO, "0.0.0-conformance.absent", "{}", in_a_while()),
                codes::UNKNOWN_OPERATION,
                false,
            ),
            (Rule::InvalidInput, request(ECHO, "", "[1, 2]", in_a_while()), "INVALID_INPUT", false),
            (Rule::DeadlinePast, request(ECHO, "", "{}", past), codes::DEADLINE_EXCEEDED, true),
        ];
        for (rule, request, code, retryable) in cases {
            let what = format!("Execute for {rule}");
            // A past deadline gets the bound's time on the wire, not none.
            let mut call = tonic::Request::new(request);
            call.set_timeout(STREAM_BOUND);
            let mut stream = match self.client().execute(call).await {
                Ok(events) => Stream::new(&what, 0, events.into_inner()),
                Err(status) => {
                    let what = format!("{what}: the call failed: {:?}: {}", status.code(), status.message());
                    self.findings.violated(rule, what);
                    continue;
                }
            };
            stream.read_to_end(STREAM_BOUND).await;
            self.check_stream(&stream);
            self.findings.record(rule, expect_failed(&stream, code, retryable));
            // Nothing ran: no version to record on the attempt.
            let outcome = match stream.running_version() {
                Some(v) if !v.is_empty() => Err(format!("{what}: refused, yet running names version {v:?}")),
                _ => Ok(()),
            };
            self.findings.record(Rule::RunningVersion, outcome);
        }
    }
}
