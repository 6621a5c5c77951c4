//! Durable waits on real Postgres (docs/src/guide/waits.md): a wait is never leased; signals,
//! events and completion tokens complete it once; a timeout racing a signal records one
//! completion; a paused run keeps its completion until it is resumed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use rara_store::Store;
use rara_store::flow::PauseTarget;
use rara_store::waits::{Delivery, Signal, TokenCompletion};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

const APPROVAL: &str = "name: release
steps:
  - {name: evaluate, operation: noop}
  - name: approve
    depends_on: [evaluate]
    wait: {signal: approve, schema: {type: object, required: [approved_by], properties: {approved_by: {type: string}}}}
  - {name: promote, operation: noop, depends_on: [approve]}
";

fn signal(id: &str, payload: Value) -> Signal {
    Signal { id: id.into(), payload, reject: None }
}

async fn output(pool: &PgPool, step_id: Uuid) -> Option<Value> {
    sqlx::query_scalar("SELECT output FROM steps WHERE id = $1").bind(step_id).fetch_one(pool).await.unwrap()
}

/// Submits `yaml`, succeeds the step `first` (if any) through a lease and claim, and runs a
/// round of waits: the wait after it begins.
async fn waiting(store: &Store, pool: &PgPool, yaml: &str, first: Option<&str>) -> Uuid {
    let run_id = store.submit(&plan(yaml)).await.unwrap().run_id;
    if let Some(first) = first {
        let leased = lease_named(store, pool, run_id, first).await;
        let claimed = claim_one(store, "w", &leased).await;
        store.succeed(&[(claimed.holder.clone(), json!({}))]).await.unwrap();
    }
    store.wait_round(100).await.unwrap();
    run_id
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_waiting_step_is_never_leased_and_a_signal_completes_it_once(pool: PgPool) {
    let store = Store::new(pool.clone());
    let run_id = waiting(&store, &pool, APPROVAL, Some("evaluate")).await;
    let approve = step_id(&pool, run_id, "approve").await;
    assert_eq!(status(&pool, approve).await, "waiting");
    let shown = store.run(run_id).await.unwrap().steps.into_iter().find(|s| s.name == "approve").unwrap();
    assert_eq!(shown.status_text(), "waiting (signal approve, no timeout)");
    // The lease takes nothing: the wait is not a due step.
    let leased = store.lease_due("s", 100, Duration::from_secs(30)).await.unwrap();
    assert!(leased.iter().all(|l| l.step_id != approve), "{leased:?}");

    // A payload that fails the schema is refused with the field path, and changes nothing.
    let refused = store.signal(run_id, "approve", &signal("a", json!({"approved_by": 7}))).await.unwrap();
    let Delivery::Invalid(problems) = refused else { panic!("{refused:?}") };
    assert_eq!(problems[0].0, "/approved_by", "{problems:?}");
    assert_eq!(status(&pool, approve).await, "waiting");

    let delivered = store.signal(run_id, "approve", &signal("a", json!({"approved_by": "ana"}))).await.unwrap();
    assert_eq!(delivered, Delivery::Delivered { steps: vec!["approve".into()], paused: false });
    assert_eq!(status(&pool, approve).await, "succeeded");
    assert_eq!(output(&pool, approve).await, Some(json!({"approved_by": "ana"})));
    // Its dependent is due.
    let promote = step_id(&pool, run_id, "promote").await;
    let deps: i32 = sqlx::query_scalar("SELECT pending_deps FROM steps WHERE id = $1")
        .bind(promote)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(deps, 0);

    // The same id again is one delivery; another id finds nothing waiting, and says why.
    let again = store.signal(run_id, "approve", &signal("a", json!({"approved_by": "bob"}))).await.unwrap();
    assert_eq!(again, Delivery::Duplicate);
    let late = store.signal(run_id, "approve", &signal("b", json!({"approved_by": "bob"}))).await.unwrap();
    let Delivery::NotWaiting(why) = late else { panic!("{late:?}") };
    assert!(why.contains("approve is succeeded"), "{why}");
    assert_eq!(output(&pool, approve).await, Some(json!({"approved_by": "ana"})));
    let attempts: i64 =
        sqlx::query_scalar("SELECT count(*) FROM step_attempts WHERE step_id = $1 AND outcome = 'succeeded'")
            .bind(approve)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(attempts, 1);
    // An unknown signal name is refused too.
    let unknown = store.signal(run_id, "nope", &signal("c", json!({}))).await.unwrap();
    assert!(matches!(unknown, Delivery::NotWaiting(ref why) if why.contains("no step of this run")), "{unknown:?}");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_rejection_fails_the_wait_and_skips_its_dependents_and_retry_waits_again(pool: PgPool) {
    let store = Store::new(pool.clone());
    let run_id = waiting(&store, &pool, APPROVAL, Some("evaluate")).await;
    let rejected = Signal { id: "r".into(), payload: json!({}), reject: Some("numbers look off".into()) };
    assert!(matches!(store.signal(run_id, "approve", &rejected).await.unwrap(), Delivery::Delivered { .. }));
    let approve = step_id(&pool, run_id, "approve").await;
    assert_eq!(status(&pool, approve).await, "failed");
    let code: String = sqlx::query_scalar("SELECT error->>'code' FROM steps WHERE id = $1")
        .bind(approve)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(code, "SIGNAL_REJECTED");
    assert_eq!(status(&pool, step_id(&pool, run_id, "promote").await).await, "skipped");
    assert_eq!(run_status(&pool, run_id).await, "failed");

    // `rara retry` of a rejected wait waits again, with a new attempt.
    store.retry_step(approve).await.unwrap();
    store.wait_round(100).await.unwrap();
    assert_eq!(status(&pool, approve).await, "waiting");
    let delivered = store.signal(run_id, "approve", &signal("ok", json!({"approved_by": "ana"}))).await.unwrap();
    assert!(matches!(delivered, Delivery::Delivered { .. }), "{delivered:?}");
    assert_eq!(status(&pool, approve).await, "succeeded");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn an_event_completes_only_the_waits_of_its_key(pool: PgPool) {
    let store = Store::new(pool.clone());
    let yaml = |key: &str| {
        format!(
            "name: index\ninputs: {{dataset_id: {{type: string, default: {key}}}}}\nsteps:\n  - name: dataset\n    \
             wait: {{event: dataset.uploaded, key: {{$input: /dataset_id}}, timeout_seconds: 600}}\n"
        )
    };
    let a = waiting(&store, &pool, &yaml("A"), None).await;
    let b = waiting(&store, &pool, &yaml("B"), None).await;
    let receipt = store.send_event("dataset.uploaded", "A", "e1", &json!({"uri": "s3://a"})).await.unwrap();
    assert!(receipt.fresh);
    assert_eq!(receipt.completed, 1);
    assert_eq!(run_status(&pool, a).await, "succeeded");
    assert_eq!(output(&pool, step_id(&pool, a, "dataset").await).await, Some(json!({"uri": "s3://a"})));
    assert_eq!(status(&pool, step_id(&pool, b, "dataset").await).await, "waiting");
    // The same event id is one send.
    let again = store.send_event("dataset.uploaded", "B", "e1", &json!({})).await.unwrap();
    assert!(!again.fresh);
    assert_eq!(status(&pool, step_id(&pool, b, "dataset").await).await, "waiting");

    // A wait that begins after its event was sent (during its run) sees it.
    let c = store.submit(&plan(&yaml("C"))).await.unwrap().run_id;
    store.send_event("dataset.uploaded", "C", "e2", &json!({"uri": "s3://c"})).await.unwrap();
    store.wait_round(100).await.unwrap();
    store.wait_round(100).await.unwrap();
    assert_eq!(run_status(&pool, c).await, "succeeded");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_completion_token_completes_its_wait_once(pool: PgPool) {
    let store = Store::new(pool.clone());
    let run_id = waiting(&store, &pool, APPROVAL, Some("evaluate")).await;
    let waits = store.waits(Some(run_id), 10).await.unwrap();
    assert_eq!(waits.len(), 1);
    let token = waits[0].token.clone().unwrap();
    assert!(token.len() >= 60, "{token}");
    assert_eq!(store.complete_by_token("not-a-token", &json!({})).await.unwrap(), None);
    let invalid = store.complete_by_token(&token, &json!({})).await.unwrap();
    assert!(matches!(invalid, Some(TokenCompletion::Invalid(_))), "{invalid:?}");
    let done = store.complete_by_token(&token, &json!({"approved_by": "partner"})).await.unwrap();
    assert_eq!(done, Some(TokenCompletion::Completed { run_id, step: "approve".into(), paused: false }));
    // Used: like a wrong token.
    assert_eq!(store.complete_by_token(&token, &json!({"approved_by": "x"})).await.unwrap(), None);
    assert_eq!(output(&pool, step_id(&pool, run_id, "approve").await).await, Some(json!({"approved_by": "partner"})));
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_paused_run_keeps_its_completion_until_it_is_resumed(pool: PgPool) {
    let store = Store::new(pool.clone());
    let run_id = waiting(&store, &pool, APPROVAL, Some("evaluate")).await;
    store.pause(&PauseTarget::Run(run_id)).await.unwrap();
    let delivered = store.signal(run_id, "approve", &signal("p", json!({"approved_by": "ana"}))).await.unwrap();
    assert_eq!(delivered, Delivery::Delivered { steps: vec!["approve".into()], paused: true });
    let approve = step_id(&pool, run_id, "approve").await;
    store.wait_round(100).await.unwrap();
    assert_eq!(status(&pool, approve).await, "waiting");
    // A second signal finds it decided.
    let second = store.signal(run_id, "approve", &signal("q", json!({"approved_by": "bob"}))).await.unwrap();
    assert!(
        matches!(second, Delivery::NotWaiting(ref why) if why.contains("already completed by signal p")),
        "{second:?}"
    );
    store.resume(&PauseTarget::Run(run_id)).await.unwrap();
    store.wait_round(100).await.unwrap();
    assert_eq!(status(&pool, approve).await, "succeeded");
    assert_eq!(output(&pool, approve).await, Some(json!({"approved_by": "ana"})));
}

/// A signal sent at the moment a 2 s timeout comes, 50 times: each wait ends with exactly one
/// completion, and the signal's answer agrees with it.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_signal_racing_the_timeout_records_one_completion(pool: PgPool) {
    let store = Store::new(pool.clone());
    let yaml = "name: race\nsteps:\n  - {name: gate, wait: {signal: go, timeout_seconds: 2}}\n";
    let mut runs = Vec::new();
    for _ in 0..50 {
        runs.push(store.submit(&plan(yaml)).await.unwrap().run_id);
    }
    store.wait_round(100).await.unwrap();
    let shown = store.run(runs[0]).await.unwrap().steps.remove(0).status_text();
    assert!(shown.starts_with("waiting (signal go, ") && shown.ends_with(" s left)"), "{shown}");
    tokio::time::sleep(Duration::from_millis(1990)).await;
    let rounds = {
        let store = store.clone();
        tokio::spawn(async move {
            for _ in 0..20 {
                store.wait_round(100).await.unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let mut answers = Vec::new();
    for run_id in &runs {
        answers.push(store.signal(*run_id, "go", &signal("s", json!({"by": "signal"}))).await.unwrap());
    }
    rounds.await.unwrap();
    store.wait_round(100).await.unwrap();
    let (mut by_signal, mut by_timeout) = (0, 0);
    for (run_id, answer) in runs.iter().zip(&answers) {
        let gate = step_id(&pool, *run_id, "gate").await;
        let closed: Vec<String> = sqlx::query_scalar("SELECT outcome::text FROM step_attempts WHERE step_id = $1")
            .bind(gate)
            .fetch_all(&pool)
            .await
            .unwrap();
        assert_eq!(closed.len(), 1, "one attempt, closed once: {closed:?}");
        match (status(&pool, gate).await.as_str(), answer) {
            ("succeeded", Delivery::Delivered { paused: false, .. }) => {
                by_signal += 1;
                assert_eq!(output(&pool, gate).await, Some(json!({"by": "signal"})));
            }
            ("failed", Delivery::NotWaiting(why)) => {
                by_timeout += 1;
                assert!(why.contains("timeout") || why.contains("failed"), "{why}");
            }
            other => panic!("a wait ended {other:?}"),
        }
    }
    assert_eq!(by_signal + by_timeout, 50);
}

/// Every wait that ends is forgotten by a round of waits and returned for its span, whoever
/// ended it: a timeout (counted as one), a signal, and a cancel (which decides the wait, so no
/// row of it lingers).
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn every_ended_wait_is_forgotten_and_returned_for_its_span(pool: PgPool) {
    let store = Store::new(pool.clone());
    let yaml = "name: ends
steps:
  - {name: short, wait: {signal: late, timeout_seconds: 1, on_timeout: continue}}
  - {name: signalled, wait: {signal: go}}
  - {name: cancelled, wait: {event: never.sent, key: k}}
";
    let run_id = store.submit(&plan(yaml)).await.unwrap().run_id;
    assert_eq!(store.wait_round(100).await.unwrap().started, 3);
    let delivered = store.signal(run_id, "go", &signal("g1", json!({}))).await.unwrap();
    assert!(matches!(delivered, Delivery::Delivered { .. }), "{delivered:?}");
    assert!(store.cancel_step(step_id(&pool, run_id, "cancelled").await, "not needed").await.unwrap());
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let round = store.wait_round(100).await.unwrap();
    assert_eq!((round.decided, round.timed_out, round.applied), (1, 1, 1), "{round:?}");
    let mut ended: Vec<(String, String, bool)> =
        round.ended.iter().map(|w| (w.kind.clone(), w.decided_by.clone(), w.failed)).collect();
    ended.sort();
    assert_eq!(
        ended,
        vec![
            ("event".into(), "cancelled".into(), true),
            ("signal".into(), "signal g1".into(), false),
            ("signal".into(), "timeout".into(), false),
        ]
    );
    for w in &round.ended {
        assert_eq!((w.run_id, w.attempt), (run_id, 1));
        assert!(w.decided_at >= w.started_at);
        assert!(w.trace_context.is_some(), "a run's context comes with it");
    }
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM waits").fetch_one(&pool).await.unwrap();
    assert_eq!(left, 0, "no row of an ended wait lingers");
    assert!(store.wait_round(100).await.unwrap().ended.is_empty(), "forgotten once");
}
