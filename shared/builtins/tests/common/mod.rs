//! What the `http.request` test suites share.

use std::sync::Arc;
use std::time::Duration;

use rara_domain::executor::{DiscardReporter, ExecutionContext};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The context of a first attempt of `http.request` whose deadline is `time_left` away.
pub fn context(time_left: Duration) -> ExecutionContext {
    ExecutionContext {
        run_id: uuid::Uuid::nil(),
        step_id: uuid::Uuid::nil(),
        map_index: None,
        operation: "http.request".to_owned(),
        version: None,
        attempt: 1,
        fence: 1,
        deadline: Instant::now() + time_left,
        cancel: CancellationToken::new(),
        stop_reason: Default::default(),
        reporter: Arc::new(DiscardReporter),
        detach: Default::default(),
    }
}
