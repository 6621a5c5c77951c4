//! Data flow at claim: the statement that reads what a batch's references need answers for the
//! whole batch in one round trip, and the resolved input is recorded on the attempt, fenced.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use rara_domain::executor::Artifact;
use rara_domain::references::{Reference, Sources};
use rara_store::lease::Leased;
use rara_store::references::Needs;
use rara_store::{Error, Store};
use serde_json::json;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use uuid::Uuid;

const FLOW: &str = "name: flow\ninputs: {date: {type: string, default: '2026-12-04'}}\nsteps:\n  - {name: fetch, operation: noop}\n  - {name: summarise, operation: noop, depends_on: [fetch], input: {text: {$output: fetch, pointer: /body}}}\n";

/// Runs `fetch` of `run_id` (leased in `leased`) to success with `output`, reporting
/// `artifacts` on its way.
async fn succeed_fetch(
    store: &Store,
    pool: &PgPool,
    leased: &[Leased],
    run_id: Uuid,
    output: serde_json::Value,
    artifacts: &[Artifact],
) {
    let id = step_id(pool, run_id, "fetch").await;
    let step = claim_one(store, "executor", leased.iter().find(|l| l.step_id == id).unwrap()).await;
    for artifact in artifacts {
        store.artifact(&step.holder, artifact).await.unwrap();
    }
    store.succeed(&[(step.holder, output)]).await.unwrap().remove(0).unwrap();
}

fn artifact(name: &str, uri: &str) -> Artifact {
    Artifact {
        name: name.into(),
        uri: uri.into(),
        media_type: Some("text/plain".into()),
        size_bytes: Some(12),
        digest: Some("sha256:ab".into()),
    }
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn one_statement_reads_outputs_artifacts_and_inputs_for_a_whole_batch(pool: PgPool) {
    let store = Store::new(pool.clone());
    let one = store.submit(&plan(FLOW)).await.unwrap().run_id;
    let two = store.submit(&plan(&FLOW.replace("2026-12-04", "2027-01-01"))).await.unwrap().run_id;
    let three = store.submit(&plan(FLOW)).await.unwrap().run_id;
    // The first of two artifacts of the same name is superseded by the later one.
    let reports = [artifact("report", "s3://old"), artifact("report", "s3://b/one"), artifact("log", "s3://b/log")];
    let leased = store.lease_due("scheduler", 100, LEASE).await.unwrap();
    succeed_fetch(&store, &pool, &leased, one, json!({"body": "one"}), &reports).await;
    succeed_fetch(&store, &pool, &leased, two, json!({"body": "two"}), &[]).await;
    // `three`'s fetch has not succeeded: it has no output.

    let mut needs = Needs::default();
    for run in [one, two, three] {
        needs.add(run, &Reference::Output { step: "fetch", pointer: Some("/body") });
        needs.add(run, &Reference::Output { step: "fetch", pointer: None });
        needs.add(run, &Reference::Artifact { step: "fetch", name: "report" });
        needs.add(run, &Reference::Input { pointer: "/date" });
    }
    needs.add(one, &Reference::Output { step: "no-such-step", pointer: None });

    // A store whose every round trip takes a connection from the pool: count them.
    let acquired = Arc::new(AtomicUsize::new(0));
    let counter = acquired.clone();
    let counting = PgPoolOptions::new()
        .max_connections(1)
        .before_acquire(move |_, _| {
            let counter = counter.clone();
            Box::pin(async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(true)
            })
        })
        .connect_with((*pool.connect_options()).clone())
        .await
        .unwrap();
    let upstream = Store::new(counting).references(&needs).await.unwrap();
    assert_eq!(acquired.load(Ordering::SeqCst), 1, "one round trip for the whole batch");

    let of_one = upstream.of_run(one);
    assert_eq!(of_one.output("fetch"), Some(&json!({"body": "one"})));
    assert_eq!(
        of_one.artifact("fetch", "report"),
        Some(&json!({"uri": "s3://b/one", "media_type": "text/plain", "size_bytes": 12, "digest": "sha256:ab"}))
    );
    assert_eq!(of_one.artifact("fetch", "log"), None, "only what the batch needs is read");
    assert_eq!(of_one.output("no-such-step"), None);
    assert_eq!(of_one.inputs(), Some(&json!({"date": "2026-12-04"})));
    let of_two = upstream.of_run(two);
    assert_eq!(of_two.output("fetch"), Some(&json!({"body": "two"})));
    assert_eq!(of_two.artifact("fetch", "report"), None);
    assert_eq!(of_two.inputs(), Some(&json!({"date": "2027-01-01"})));
    let of_three = upstream.of_run(three);
    assert_eq!(of_three.output("fetch"), None, "a step that has not succeeded has no output");
    assert_eq!(of_three.inputs(), Some(&json!({"date": "2026-12-04"})));
    assert_eq!((upstream.outputs.len(), upstream.artifacts.len(), upstream.inputs.len()), (2, 1, 3));
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_resolved_input_is_recorded_on_the_attempt_only_by_its_holder(pool: PgPool) {
    let store = Store::new(pool.clone());
    let run_id = store.submit(&plan(FLOW)).await.unwrap().run_id;
    let leased = store.lease_due("scheduler", 100, LEASE).await.unwrap();
    succeed_fetch(&store, &pool, &leased, run_id, json!({"body": "hi"}), &[]).await;
    let leased = lease_named(&store, &pool, run_id, "summarise").await;
    let step = claim_one(&store, "executor", &leased).await;
    let resolved = json!({"text": "hi", "key": {"$secret": "api"}});

    let stale = stale_holder(&step.holder);
    let results = store.record_inputs(&[(stale, json!({"text": "stale"}))]).await.unwrap();
    assert!(matches!(results[0], Err(Error::LeaseLost { .. })), "{results:?}");
    let results = store.record_inputs(&[(step.holder.clone(), resolved.clone())]).await.unwrap();
    assert!(results[0].is_ok(), "{results:?}");

    let run = store.run(run_id).await.unwrap();
    assert_eq!(run.inputs, json!({"date": "2026-12-04"}));
    let summarise = run.steps.iter().find(|s| s.name == "summarise").unwrap();
    assert_eq!(summarise.attempts[0].input, Some(resolved));
    let fetch = run.steps.iter().find(|s| s.name == "fetch").unwrap();
    assert_eq!(fetch.attempts[0].input, None, "an input without references is not copied");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_succeeded_run_shows_its_outputs_resolved(pool: PgPool) {
    let store = Store::new(pool.clone());
    let with_outputs = |body_pointer: &str| {
        FLOW.replace(
            "steps:",
            &format!("output: {{body: {{$output: fetch, pointer: {body_pointer}}}, report: {{$artifact: fetch, name: report}}, date: [{{$input: /date}}], all: {{$output: summarise}}}}\nsteps:"),
        )
    };
    let good = store.submit(&plan(&with_outputs("/body"))).await.unwrap().run_id;
    let bad = store.submit(&plan(&with_outputs("/bdy"))).await.unwrap().run_id;
    let leased = store.lease_due("scheduler", 100, LEASE).await.unwrap();
    for run in [good, bad] {
        let leak = json!({"body": "hi", "leak": {"$secret": "api"}});
        succeed_fetch(&store, &pool, &leased, run, leak, &[artifact("report", "s3://b/r")]).await;
    }
    assert_eq!(store.run(good).await.unwrap().output, None, "a run still running has no output yet");

    let leased = store.lease_due("scheduler", 100, LEASE).await.unwrap();
    for run in [good, bad] {
        let id = step_id(&pool, run, "summarise").await;
        let step = claim_one(&store, "executor", leased.iter().find(|l| l.step_id == id).unwrap()).await;
        let output = json!({"summary": "short", "echo": {"$secret": "api"}});
        store.succeed(&[(step.holder, output)]).await.unwrap().remove(0).unwrap();
    }
    let run = store.run(good).await.unwrap();
    assert_eq!(run_status(&pool, good).await, "succeeded");
    assert_eq!(
        run.output,
        Some(json!({
            "body": "hi",
            "report": {"uri": "s3://b/r", "media_type": "text/plain", "size_bytes": 12, "digest": "sha256:ab"},
            "date": ["2026-12-04"],
            "all": {"summary": "short", "echo": {"$$secret": "api"}},
        }))
    );
    assert_eq!(run.output_error, None);
    let run = store.run(bad).await.unwrap();
    assert_eq!(run.output, None);
    assert_eq!(run.output_error.as_deref(), Some(r#"output.body: the output of step "fetch" has nothing at "/bdy""#));
}
