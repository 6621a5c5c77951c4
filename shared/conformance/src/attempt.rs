//! A fresh attempt to check: its wire request ([`request`]), its context for rara's own client
//! ([`context`]) and the reporter that keeps the version the client reports ([`Recording`]).

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rara_domain::executor::{Artifact, ExecutionContext, ReportError, Reporter};
use rara_remote::pb::{self};
use tokio::time::Instant;
use uuid::Uuid;

/// A request for attempt 1 of a fresh step.
pub(crate) fn request(
    operation: &str,
    version: &str,
    input_json: &str,
    deadline: Option<SystemTime>,
) -> pb::ExecuteRequest {
    pb::ExecuteRequest {
        run_id: Uuid::new_v4().to_string(),
        step_id: Uuid::new_v4().to_string(),
        attempt: 1,
        fence: 1,
        operation: operation.to_owned(),
        capability_version: version.to_owned(),
        input_json: input_json.to_owned(),
        deadline: deadline.map(prost_types::Timestamp::from),
        ..Default::default()
    }
}

/// A deadline no check reaches.
pub(crate) fn in_a_while() -> Option<SystemTime> {
    Some(SystemTime::now() + Duration::from_secs(60))
}

/// The context of a fresh step's attempt 1, for [`RemoteExecutor`].
pub(crate) fn context(operation: &str, reporter: Arc<Recording>) -> ExecutionContext {
    ExecutionContext {
        run_id: Uuid::new_v4(),
        step_id: Uuid::new_v4(),
        map_index: None,
        operation: operation.to_owned(),
        version: None,
        attempt: 1,
        fence: 1,
        deadline: Instant::now() + Duration::from_secs(60),
        cancel: tokio_util::sync::CancellationToken::new(),
        stop_reason: Default::default(),
        reporter,
        detach: Default::default(),
    }
}

/// Keeps the version the client reports; progress and artifacts are checked on the wire.
#[derive(Debug, Default)]
pub(crate) struct Recording {
    pub(crate) version: Mutex<Option<String>>,
}

#[async_trait::async_trait]
impl Reporter for Recording {
    async fn progress(&self, _fraction: f64, _message: &str) -> Result<(), ReportError> {
        Ok(())
    }

    async fn artifact(&self, _artifact: Artifact) -> Result<(), ReportError> {
        Ok(())
    }

    async fn version(&self, version: &str) -> Result<(), ReportError> {
        *self.version.lock().unwrap_or_else(|p| p.into_inner()) = Some(version.to_owned());
        Ok(())
    }
}
