//! Test helpers: an execution context with a reporter that records progress.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rara_domain::executor::{Artifact, ExecutionContext, ReportError, Reporter};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Records every progress report; answers `LeaseLost` from the `lease_lost_at`-th report on.
#[derive(Debug, Default)]
pub(crate) struct RecordingReporter {
    pub(crate) reports: Mutex<Vec<(f64, String)>>,
    pub(crate) lease_lost_at: Option<usize>,
}

impl RecordingReporter {
    pub(crate) fn reports(&self) -> Vec<(f64, String)> {
        self.reports.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl Reporter for RecordingReporter {
    async fn progress(&self, fraction: f64, message: &str) -> Result<(), ReportError> {
        let mut reports = self.reports.lock().unwrap();
        reports.push((fraction, message.to_owned()));
        match self.lease_lost_at {
            Some(at) if reports.len() >= at => Err(ReportError::LeaseLost),
            _ => Ok(()),
        }
    }

    async fn artifact(&self, _artifact: Artifact) -> Result<(), ReportError> {
        Ok(())
    }
}

/// A first attempt with an hour to go and a fresh reporter.
pub(crate) fn context() -> (ExecutionContext, Arc<RecordingReporter>) {
    context_with(RecordingReporter::default(), Duration::from_secs(3600))
}

pub(crate) fn context_with(
    reporter: RecordingReporter,
    time_left: Duration,
) -> (ExecutionContext, Arc<RecordingReporter>) {
    let reporter = Arc::new(reporter);
    let ctx = ExecutionContext {
        run_id: Uuid::nil(),
        step_id: Uuid::nil(),
        map_index: None,
        operation: "test".to_owned(),
        version: None,
        attempt: 1,
        fence: 1,
        deadline: tokio::time::Instant::now() + time_left,
        cancel: CancellationToken::new(),
        stop_reason: Default::default(),
        reporter: reporter.clone(),
        detach: Default::default(),
    };
    (ctx, reporter)
}
