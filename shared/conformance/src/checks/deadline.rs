//! [`Rule::DeadlineMidStep`]: a step that runs into its deadline.

use std::time::SystemTime;

use rara_domain::step_error::codes;
use rara_remote::client::DEADLINE_GRACE;
use rara_remote::pb::execute_response::Event;
use rara_remote::pb::{self};
use serde_json::json;

use crate::attempt::request;
use crate::rules::Rule;
use crate::stream::describe_terminal;
use crate::suite::Suite;
use crate::{SHORT_DEADLINE, SLEEP, STOP_BOUND};

impl Suite {
    /// [`Rule::DeadlineMidStep`]: a sleep that runs into a 1 s deadline.
    pub(crate) async fn deadline_mid_step(&mut self) {
        let what = format!("Execute {SLEEP} with a deadline {SHORT_DEADLINE:?} ahead");
        let deadline = SystemTime::now() + SHORT_DEADLINE;
        let request = request(SLEEP, "", &json!({"seconds": 60}).to_string(), Some(deadline));
        let Some(mut stream) = self.execute(Rule::DeadlineMidStep, &what, request).await else { return };
        // The call's own gRPC deadline (the attempt's plus the grace) ends it in any case.
        stream.read_to_end(SHORT_DEADLINE + DEADLINE_GRACE + STOP_BOUND).await;
        self.check_stream(&stream);
        let late = SystemTime::now().duration_since(deadline).unwrap_or_default();
        let outcome = match stream.terminal() {
            Some(Event::Failed(pb::Failed { error: Some(e) })) if e.code == codes::DEADLINE_EXCEEDED && e.retryable => {
                Ok(())
            }
            Some(Event::Cancelled(_)) => Ok(()),
            Some(_) => Err(format!(
                "{what}: ended with {}, expected failed DEADLINE_EXCEEDED (retryable) or cancelled",
                describe_terminal(&stream)
            )),
            None => Err(format!(
                "{what}: no terminal event by {late:?} after the deadline (the grace is {DEADLINE_GRACE:?}); {}",
                stream.ending()
            )),
        };
        self.findings.record(Rule::DeadlineMidStep, outcome);
    }
}
