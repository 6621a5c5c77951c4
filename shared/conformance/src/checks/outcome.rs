//! The outcome rules through rara's own client, as a step runs: [`Rule::OutputObject`],
//! [`Rule::StructuredError`] and the version the reporter receives ([`Rule::RunningVersion`]).

use std::sync::Arc;

use rara_domain::executor::Executor;
use rara_remote::RemoteExecutor;
use serde_json::json;

use super::discovery::Offer;
use crate::attempt::{Recording, context};
use crate::rules::Rule;
use crate::suite::Suite;
use crate::{ECHO, FAIL};

impl Suite {
    /// The outcome rules through [`RemoteExecutor`], as a step runs.
    pub(crate) async fn through_client(&mut self, echo: &Offer, fail: &Offer) {
        let input = json!({"conformance": "echo", "list": [1, "two", null], "nested": {"ok": true}});
        let reporter = Arc::new(Recording::default());
        let security = Arc::new(self.security.clone());
        let executor = RemoteExecutor::new(self.channel.clone(), self.endpoint.clone(), ECHO, &echo.version)
            .with_security(security.clone());
        let outcome = match executor.execute(context(ECHO, reporter.clone()), input.clone()).await {
            Ok(output) if output == json!({ "echo": input }) => Ok(()),
            Ok(output) => Err(format!("{ECHO} answered {output}, expected {}", json!({ "echo": input }))),
            Err(err) => Err(format!("{ECHO} failed through rara's client: {}: {}", err.code, err.message)),
        };
        self.findings.record(Rule::OutputObject, outcome);
        let version = reporter.version.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let outcome = match version {
            Some(v) if v == echo.version => Ok(()),
            other => Err(format!("through rara's client, {ECHO} reported running version {other:?}")),
        };
        self.findings.record(Rule::RunningVersion, outcome);

        let executor = RemoteExecutor::new(self.channel.clone(), self.endpoint.clone(), FAIL, &fail.version)
            .with_security(security);
        for retryable in [true, false] {
            let details = json!({"rule": "structured-error", "retryable": retryable.to_string()});
            let input = json!({
                "code": "CONFORMANCE_FAILURE", "message": "failed on purpose", "retryable": retryable,
                "details": details,
            });
            let outcome = match executor.execute(context(FAIL, Arc::new(Recording::default())), input).await {
                Ok(output) => Err(format!("{FAIL} succeeded with {output}")),
                Err(err)
                    if err.code == "CONFORMANCE_FAILURE"
                        && err.message == "failed on purpose"
                        && err.retryable == retryable
                        && err.details == details =>
                {
                    Ok(())
                }
                Err(err) => Err(format!(
                    "{FAIL} (retryable {retryable}) arrived as code {:?}, message {:?}, retryable {}, details {}",
                    err.code, err.message, err.retryable, err.details
                )),
            };
            self.findings.record(Rule::StructuredError, outcome);
        }
    }
}
