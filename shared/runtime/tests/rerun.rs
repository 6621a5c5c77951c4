//! Rerun from a step (docs/src/guide/recover.md) through the scheduler and the executor on
//! Postgres + LocalStack's SQS: a five-step chain whose fourth step fails permanently, rerun
//! from it with a corrected input, runs steps 4 and 5 only (the executor's calls prove it);
//! the first three are carried over with their outputs, attempts and artifacts; a changed input
//! that a carried step read is refused naming it, unless forced.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use rara_domain::workflow::{Format, WorkflowDefinition};
use rara_store::rerun::RerunRequest;
use serde_json::{Map, Value, json};
use sqlx::PgPool;

const LIMIT: Duration = Duration::from_secs(60);

const CHAIN: &str = "name: chain
inputs:
  n: {type: integer}
  fail_attempts: {type: integer}
steps:
  - {name: s1, operation: test.echo, input: {step: s1}}
  - {name: s2, operation: test.echo, depends_on: [s1], input: {step: s2, n: {$input: /n}}}
  - {name: s3, operation: test.echo, depends_on: [s2], input: {step: s3, from2: {$output: s2, pointer: /n}}}
  - name: s4
    operation: fail
    depends_on: [s3]
    max_attempts: 1
    input: {fail_attempts: {$input: /fail_attempts}, retryable: false}
  - {name: s5, operation: test.echo, depends_on: [s4], input: {step: s5, from3: {$output: s3}}}
";

fn request(from: &str, inputs: Value, force: bool) -> RerunRequest {
    let inputs = inputs.as_object().cloned().unwrap_or_default();
    RerunRequest { from: Some(from.into()), idempotency_key: None, inputs, force, version: None }
}

fn called(echo: &Echo) -> Vec<String> {
    echo.0.lock().unwrap().iter().map(|i| i["step"].as_str().unwrap_or_default().to_owned()).collect()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_rerun_from_the_failed_step_runs_it_and_what_follows_only(pool: PgPool) {
    let (store, _queues, stack, echo) = Stack::with_echo(pool.clone()).await;
    let inputs: Map<String, Value> = json!({"n": 2, "fail_attempts": 1}).as_object().cloned().unwrap();
    let plan = WorkflowDefinition::parse(CHAIN, Format::Yaml)
        .unwrap()
        .plan_for(&stack.settings.core, &inputs, |_, _| true)
        .unwrap();
    let original = store.submit(&plan).await.unwrap().run_id;
    let (status, _) = stack.run_until_finished(original, LIMIT).await;
    assert_eq!(status, "failed");
    assert_eq!(called(&echo), ["s1", "s2", "s3"]);
    let s1 = store.run(original).await.unwrap().steps.into_iter().find(|s| s.name == "s1").unwrap();
    sqlx::query("INSERT INTO artifacts (step_id, attempt, fence, name, uri) VALUES ($1, 1, 1, 'report', 'file:///r')")
        .bind(s1.id)
        .execute(&pool)
        .await
        .unwrap();

    // Refusals: no such step; a carried step that did not succeed; a changed input a carried
    // step read (s2 read /n).
    let refused = |r: Result<_, rara_store::Error>| match r {
        Err(rara_store::Error::RerunRefused(why)) => why,
        other => panic!("expected a refusal, got {other:?}"),
    };
    let why = refused(store.rerun(original, &request("s9", json!({}), false)).await);
    assert!(why.contains("no step \"s9\"") && why.contains("s1, s2, s3, s4, s5"), "{why}");
    let why = refused(store.rerun(original, &request("s5", json!({}), false)).await);
    assert!(why.contains("step \"s4\" is failed"), "{why}");
    let why = refused(store.rerun(original, &request("s4", json!({"n": 3, "fail_attempts": 0}), false)).await);
    assert!(why.contains("step \"s2\"") && why.contains("/n"), "{why}");
    let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM workflow_runs").fetch_one(&pool).await.unwrap();
    assert_eq!(runs, 1, "a refused rerun makes nothing");

    // The rerun with the fourth step's input corrected: steps 4 and 5 run, 1 to 3 do not.
    let rerun = store.rerun(original, &request("s4", json!({"fail_attempts": 0}), false)).await.unwrap();
    assert_eq!(
        (rerun.carried.clone(), rerun.rerun.clone()),
        (vec!["s1".into(), "s2".into(), "s3".into()], vec!["s4".into(), "s5".into()])
    );
    let (status, _) = stack.run_until_finished(rerun.run_id, LIMIT).await;
    assert_eq!(status, "succeeded");
    assert_eq!(called(&echo), ["s1", "s2", "s3", "s5"], "only s5 of the echo steps ran again");
    let echoed = echo.0.lock().unwrap().last().cloned().unwrap();
    assert_eq!(echoed["from3"], json!({"step": "s3", "from2": 2}), "a carried output flows into the rerun");

    let view = store.run(rerun.run_id).await.unwrap();
    assert_eq!(view.rerun_of, Some(original));
    assert_eq!(store.run(original).await.unwrap().reruns, vec![rerun.run_id]);
    assert_eq!(view.inputs, json!({"n": 2, "fail_attempts": 0}));
    for step in &view.steps {
        let carried = ["s1", "s2", "s3"].contains(&step.name.as_str());
        assert_eq!(step.carried_from.is_some(), carried, "{}", step.name);
        assert_eq!(step.status.as_str(), "succeeded");
        assert_eq!(step.attempts.len(), 1, "{}: the original's attempt, or its own", step.name);
        if carried {
            assert_eq!(step.status_text(), "succeeded (carried over)");
        }
    }
    let carried_s1 = view.steps.iter().find(|s| s.name == "s1").unwrap();
    assert_eq!(carried_s1.artifacts.iter().map(|a| a.uri.as_str()).collect::<Vec<_>>(), ["file:///r"]);
    let s4 = view.steps.iter().find(|s| s.name == "s4").unwrap();
    assert_eq!(s4.attempts[0].outcome, rara_domain::state::AttemptOutcome::Succeeded);

    // Forced: the changed input is accepted, and a rerun of a rerun carries from the first run.
    let forced = store.rerun(rerun.run_id, &request("s5", json!({"n": 3}), true)).await.unwrap();
    let view = store.run(forced.run_id).await.unwrap();
    let s1_again = view.steps.iter().find(|s| s.name == "s1").unwrap();
    assert_eq!(s1_again.carried_from, Some(s1.id), "carried from the step that ran");
    assert_eq!(view.inputs["n"], json!(3));
}

/// A run deadline: `timeout_seconds: 3` on a run whose step sleeps 60 s; the scheduler cancels
/// it within about a second of the deadline (its round of waits and deadlines runs every
/// 250 ms): every unfinished step with `RUN_TIMED_OUT`, the running one (its holder hears the
/// cancel and stops it) and the pending one after it.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_run_past_its_deadline_is_cancelled_with_run_timed_out(pool: PgPool) {
    let (store, _queues, stack) = Stack::fresh(pool.clone(), &[]).await;
    let yaml = "name: late\ntimeout_seconds: 3\nsteps:\n  - {name: nap, operation: sleep, input: {seconds: 60}}\n  \
                - {name: after, operation: noop, depends_on: [nap]}\n";
    let run_id = submit(&store, &stack.settings, yaml).await;
    let (status, _) = stack.run_until_finished(run_id, LIMIT).await;
    assert_eq!(status, "cancelled");
    let view = store.run(run_id).await.unwrap();
    let nap = view.steps.iter().find(|s| s.name == "nap").unwrap();
    assert_eq!(nap.error.as_ref().unwrap().code, "RUN_TIMED_OUT", "{nap:?}");
    let after = view.steps.iter().find(|s| s.name == "after").unwrap();
    assert_eq!((after.status.as_str(), after.error.as_ref().unwrap().code.as_str()), ("cancelled", "RUN_TIMED_OUT"));
    let after_deadline = finished_after_deadline(&pool, nap.id).await;
    assert!((0.0..2.0).contains(&after_deadline), "cancelled {after_deadline} s after the deadline");
    let deadline: f64 = sqlx::query_scalar(
        "SELECT extract(epoch FROM (deadline_at - created_at))::float8 FROM workflow_runs WHERE id = $1",
    )
    .bind(run_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!((3.0..3.1).contains(&deadline), "the deadline is 3 s after submission: {deadline}");
}

/// `--workflow NAME@VERSION`: a rerun made from a newer registered version whose steps upstream
/// of the step are unchanged runs the new version's downstream (here a changed s4, and an s6
/// the original did not have) and carries s1–s3; a version that changed a carried step is
/// refused naming it, one without the step too.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_rerun_from_a_newer_version_keeps_the_carried_steps_and_runs_the_new_downstream(pool: PgPool) {
    let (store, _queues, stack, echo) = Stack::with_echo(pool.clone()).await;
    let inputs: Map<String, Value> = json!({"n": 2, "fail_attempts": 1}).as_object().cloned().unwrap();
    let original = WorkflowDefinition::parse(CHAIN, Format::Yaml).unwrap();
    let plan = original.plan_for(&stack.settings.core, &inputs, |_, _| true).unwrap();
    let run = store.submit(&plan).await.unwrap().run_id;
    assert_eq!(stack.run_until_finished(run, LIMIT).await.0, "failed");

    let fixed = CHAIN.replace("fail_attempts: {$input: /fail_attempts}", "fail_attempts: 0")
        + "  - {name: s6, operation: test.echo, depends_on: [s5], input: {step: s6}}\n";
    let changed = CHAIN.replace("input: {step: s2, n: {$input: /n}}", "input: {step: s2, n: 7}");
    let without = CHAIN.replace("name: s4", "name: s4b").replace("depends_on: [s4]", "depends_on: [s4b]");
    for (i, yaml) in [&fixed, &changed, &without].into_iter().enumerate() {
        let definition = WorkflowDefinition::parse(yaml, Format::Yaml).unwrap();
        store.register_definition("chain", &serde_json::to_value(&definition).unwrap()).await.unwrap();
        assert_eq!(store.definition("chain", None).await.unwrap().version, i as i32 + 1);
    }
    let in_process = |_: &str, _: Option<&str>| true;
    let version = |v: i32| {
        let (store, config) = (store.clone(), stack.settings.core.clone());
        let inputs = inputs.clone();
        async move {
            let workflow = rara_domain::workflow::WorkflowRef { name: "chain".into(), version: Some(v) };
            rara_operator::rerun::plan_version(&store, &config, &in_process, &inputs, &workflow).await.unwrap()
        }
    };
    let with = |v| RerunRequest { version: Some(v), ..request("s4", json!({}), false) };

    for (v, expected) in [(2, "step \"s2\" (carried over) changed: its input differs"), (3, "it has no step \"s4\"")] {
        match store.rerun(run, &with(version(v).await)).await {
            Err(rara_store::Error::RerunRefused(why)) => assert!(why.contains(expected), "{why}"),
            other => panic!("version {v}: expected a refusal, got {other:?}"),
        }
    }
    let rerun = store.rerun(run, &with(version(1).await)).await.unwrap();
    assert_eq!(rerun.carried, ["s1", "s2", "s3"]);
    assert_eq!(rerun.rerun, ["s4", "s5", "s6"]);
    assert_eq!(stack.run_until_finished(rerun.run_id, LIMIT).await.0, "succeeded");
    assert_eq!(called(&echo), ["s1", "s2", "s3", "s5", "s6"], "the carried steps did not run again");
    let view = store.run(rerun.run_id).await.unwrap();
    assert_eq!((view.workflow_version, view.rerun_of), (Some(1), Some(run)));
    let carried: Vec<_> = view.steps.iter().filter(|s| s.carried_from.is_some()).map(|s| s.name.as_str()).collect();
    assert_eq!(carried, ["s1", "s2", "s3"]);
}
