//! A hostile HTTP peer inside a packed message (Postgres + LocalStack's SQS): one of ten
//! `http.request` steps of one message answers 429 with `Retry-After: 18446744073709551615`
//! (2^64 - 1 seconds). The number is clamped where it enters (`http.request`), so the batch
//! loop decides every step's fate: the nine siblings are recorded once each and the step
//! waits the longest retry delay, a day.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use common::*;
use rara_domain::state::{AttemptOutcome, StepStatus};
use sqlx::PgPool;

type Seen = Arc<Mutex<BTreeMap<String, u32>>>;

/// `/ok/NAME` answers 200, `/throttled/NAME` 429 with a Retry-After past any `Duration`; both
/// count the requests per path.
async fn peer(seen: Seen) -> String {
    async fn answer(State(seen): State<Seen>, Path((kind, name)): Path<(String, String)>) -> axum::response::Response {
        *seen.lock().unwrap().entry(format!("{kind}/{name}")).or_default() += 1;
        match kind.as_str() {
            "throttled" => (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "18446744073709551615")]).into_response(),
            _ => "ok".into_response(),
        }
    }
    let app = axum::Router::new().route("/{kind}/{name}", axum::routing::get(answer)).with_state(seen);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}")
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_retry_after_of_2_to_the_64_seconds_waits_a_day_and_spares_its_nine_siblings(pool: PgPool) {
    let seen = Seen::default();
    let base = peer(seen.clone()).await;
    let extra = [("RARA_STEPS_PER_MESSAGE", "10"), ("RARA_HTTP_ALLOW_CIDRS", "127.0.0.1/32")];
    let (store, queues, stack) = Stack::fresh(pool, &extra).await;
    let mut yaml = "name: hostile\nsteps:\n".to_owned();
    for i in 0..9 {
        yaml += &format!("  - {{name: s{i}, operation: http.request, input: {{url: '{base}/ok/s{i}'}}}}\n");
    }
    yaml += &format!(
        "  - {{name: hostile, operation: http.request, max_attempts: 3, input: {{url: '{base}/throttled/hostile'}}}}\n"
    );
    let run_id = submit(&store, &stack.settings, &yaml).await;

    let round = stack.scheduler().pass().await.unwrap();
    assert_eq!((round.leased, round.sent), (10, 10), "ten steps, one message");
    let before = chrono::Utc::now();
    let counters = stack.drain(Duration::from_secs(2)).await;
    let after = chrono::Utc::now();

    assert_eq!((counters.received, counters.claimed), (1, 10), "one message, ten steps: {counters:?}");
    assert_eq!((counters.succeeded, counters.retried), (9, 1), "{counters:?}");
    assert_eq!((counters.panicked, counters.returned, counters.unsettled), (0, 0, 0), "{counters:?}");
    let run = store.run(run_id).await.unwrap();
    for step in run.steps.iter().filter(|s| s.name != "hostile") {
        assert_eq!((step.status, step.attempts.len()), (StepStatus::Succeeded, 1), "{}", step.name);
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 10, "{seen:?}");
    assert!(seen.values().all(|n| *n == 1), "each step sent its request once: {seen:?}");

    let hostile = run.steps.iter().find(|s| s.name == "hostile").unwrap();
    assert_eq!((hostile.status, hostile.attempts.len()), (StepStatus::Pending, 1));
    let attempt = &hostile.attempts[0];
    assert_eq!(attempt.outcome, AttemptOutcome::Retrying);
    let error = attempt.error.as_ref().unwrap();
    assert_eq!((error.code.as_str(), error.retryable), ("HTTP_4XX", true));
    assert_eq!(error.details["retry_after_seconds"], 86_400);
    let day = chrono::TimeDelta::seconds(86_400);
    let retry_at = attempt.retry_at.unwrap();
    assert!(retry_at >= before + day - chrono::TimeDelta::seconds(1) && retry_at <= after + day, "{retry_at}");
    assert_eq!(hostile.next_run_at, retry_at);
    assert!(queues.dead_letters().await.is_empty());
}
