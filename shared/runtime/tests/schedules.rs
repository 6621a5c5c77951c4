//! Schedules fired by the scheduler's maintenance (docs/src/guide/schedules.md), on Postgres and
//! LocalStack's SQS: two schedulers firing `every 2s` make one run per slot; the overlap policies
//! (skip, cancel_previous, buffer_one) with runs still going; a paused schedule resumed fires only
//! the slots within its catch-up window and counts the older ones missed; a slot's run runs to the
//! end through the executor with the slot's time in its inputs. The rounds that decide
//! several slots at once move the schedule's next slot back rather than wait for the clock.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;
use rara_domain::schedule::{Overlap, Spec};
use rara_domain::workflow::{Format, WorkflowDefinition, WorkflowRef};
use rara_operator::schedules::{self, CreateSchedule};
use rara_runtime::settings::Settings;
use rara_store::Store;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

/// A run that stays `running` while no executor runs: a slot's previous run is still going.
const NIGHTLY: &str = "name: nightly\ninputs: {night: {type: string}}\nsteps: [{name: index, operation: noop}]\n";

async fn create(store: &Store, settings: &Settings, name: &str, every_s: u64, overlap: Overlap, catchup_s: u64) {
    let definition = WorkflowDefinition::parse(NIGHTLY, Format::Yaml).unwrap();
    store.register_definition("nightly", &serde_json::to_value(&definition).unwrap()).await.unwrap();
    let inputs = serde_json::json!({"night": {"$schedule": "/slot_time"}}).as_object().unwrap().clone();
    let new = CreateSchedule {
        name: name.into(),
        workflow: WorkflowRef { name: "nightly".into(), version: None },
        spec: Spec::Every(Duration::from_secs(every_s)),
        timezone: "UTC".into(),
        inputs,
        overlap,
        catchup_window: Duration::from_secs(catchup_s),
        jitter: Duration::ZERO,
    };
    schedules::create(store, &settings.core, &|_, _| true, new).await.unwrap();
}

/// The schedule's next slot moved `seconds` back (whole seconds): its next round has that many
/// slots to decide.
async fn rewind(store: &Store, name: &str, seconds: i64) {
    sqlx::query(
        "UPDATE schedules SET next_slot_at = date_trunc('second', now()) - make_interval(secs => $2),
                              next_fire_at = date_trunc('second', now()) - make_interval(secs => $2)
         WHERE name = $1",
    )
    .bind(name)
    .bind(seconds as f64)
    .execute(store.pool())
    .await
    .unwrap();
}

/// The schedule's runs: (slot, status, the `night` input), by slot.
async fn runs(store: &Store, name: &str) -> Vec<(DateTime<Utc>, String, String)> {
    sqlx::query_as(
        "SELECT r.schedule_slot, r.status::text, r.inputs->>'night' FROM workflow_runs r
         JOIN schedules s ON s.id = r.schedule_id WHERE s.name = $1 ORDER BY r.schedule_slot",
    )
    .bind(name)
    .fetch_all(store.pool())
    .await
    .unwrap()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn overlap_skip_fires_one_and_records_the_skipped_slots(pool: PgPool) {
    let (store, _queues, stack) = Stack::fresh(pool, &[]).await;
    create(&store, &stack.settings, "skip", 1, Overlap::Skip, 3600).await;
    rewind(&store, "skip", 5).await;
    let counters = stack.scheduler().pass().await.unwrap();
    let made = runs(&store, "skip").await;
    assert_eq!(made.len(), 1, "never two runs at once: {made:?}");
    assert_eq!(counters.slots_fired, 1);
    assert!(counters.slots_skipped >= 5, "{counters:?}");
    assert_eq!(made[0].2, made[0].0.to_rfc3339_opts(chrono::SecondsFormat::Secs, true), "$schedule: the slot time");
    let view = store.schedule("skip").await.unwrap();
    assert_eq!((view.slots_fired, view.slots_skipped), (1, counters.slots_skipped as i64));
    assert_eq!(view.last_run_status.map(|s| s.to_string()).as_deref(), Some("running"));
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn cancel_previous_cancels_the_run_still_going(pool: PgPool) {
    let (store, _queues, stack) = Stack::fresh(pool, &[]).await;
    create(&store, &stack.settings, "latest", 1, Overlap::CancelPrevious, 3600).await;
    rewind(&store, "latest", 3).await;
    let counters = stack.scheduler().pass().await.unwrap();
    let made = runs(&store, "latest").await;
    assert!(made.len() >= 3 && made.len() as u64 == counters.slots_fired, "{made:?} {counters:?}");
    let (last, earlier) = made.split_last().unwrap();
    assert_eq!(last.1, "running");
    assert!(earlier.iter().all(|r| r.1 == "cancelled"), "{made:?}");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn buffer_one_keeps_one_slot_until_the_previous_run_ends(pool: PgPool) {
    let (store, _queues, stack) = Stack::fresh(pool, &[]).await;
    create(&store, &stack.settings, "buffered", 1, Overlap::BufferOne, 3600).await;
    rewind(&store, "buffered", 4).await;
    let counters = stack.scheduler().pass().await.unwrap();
    assert_eq!(runs(&store, "buffered").await.len(), 1);
    let view = store.schedule("buffered").await.unwrap();
    let buffered = view.buffered_slot_at.expect("a slot waits");
    assert_eq!(counters.slots_fired, 1);
    assert!(counters.slots_skipped >= 2, "one slot waits, the later ones skip: {counters:?}");
    store.cancel_run(view.last_run_id.unwrap(), "done").await.unwrap();
    stack.scheduler().pass().await.unwrap();
    let made = runs(&store, "buffered").await;
    assert_eq!(made.len(), 2, "{made:?}");
    assert_eq!(made[1].0, buffered, "the buffered slot fired once the previous run ended");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_resumed_schedule_fires_only_the_slots_within_its_catch_up_window(pool: PgPool) {
    let (store, _queues, stack) = Stack::fresh(pool, &[]).await;
    create(&store, &stack.settings, "paused", 2, Overlap::Allow, 10).await;
    store.set_schedule_paused("paused", true).await.unwrap();
    // Paused for 30 s: the schedule's next slot is 30 s old, and a round while paused fires nothing.
    rewind(&store, "paused", 30).await;
    let while_paused = stack.scheduler().pass().await.unwrap();
    assert_eq!(while_paused.slots_fired + while_paused.slots_missed, 0);
    store.set_schedule_paused("paused", false).await.unwrap();
    let now: DateTime<Utc> = sqlx::query_scalar("SELECT now()").fetch_one(store.pool()).await.unwrap();
    let resumed = stack.scheduler().pass().await.unwrap();
    let made = runs(&store, "paused").await;
    assert!((5..=6).contains(&made.len()), "the slots of the last 10 s: {made:?}");
    assert!(made.iter().all(|r| r.0 >= now - chrono::Duration::seconds(11)), "{made:?}");
    assert!((9..=11).contains(&resumed.slots_missed), "the older ones are missed: {resumed:?}");
    assert_eq!(store.schedule("paused").await.unwrap().slots_missed, resumed.slots_missed as i64);
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_slots_run_runs_to_the_end_with_the_slot_time_in_its_inputs(pool: PgPool) {
    let (store, _queues, stack) = Stack::fresh(pool, &[]).await;
    create(&store, &stack.settings, "nightly", 3600, Overlap::Skip, 7200).await;
    rewind(&store, "nightly", 3600).await;
    assert_eq!(stack.scheduler().pass().await.unwrap().slots_fired, 1);
    let run_id: uuid::Uuid = sqlx::query_scalar("SELECT id FROM workflow_runs WHERE schedule_id IS NOT NULL")
        .fetch_one(store.pool())
        .await
        .unwrap();
    let (status, _) = stack.run_until_finished(run_id, Duration::from_secs(60)).await;
    assert_eq!(status, "succeeded");
    let run = store.run(run_id).await.unwrap();
    let slot = runs(&store, "nightly").await[0].0;
    assert_eq!(run.inputs["night"], slot.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    assert_eq!(run.workflow_version, Some(1));
}

/// How long the two schedulers run, and the schedule's interval.
const RUN_FOR: Duration = Duration::from_secs(60);
const EVERY_S: u64 = 2;

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn two_schedulers_make_one_run_per_slot(pool: PgPool) {
    let (store, _queues, stack) = Stack::fresh(pool, &[]).await;
    create(&store, &stack.settings, "heartbeat", EVERY_S, Overlap::Allow, 3600).await;
    let first_slot = store.schedule("heartbeat").await.unwrap().next_slot_at;
    let stop = CancellationToken::new();
    let (a, b) = (stack.scheduler(), stack.scheduler());
    let (a, b) = tokio::join!(a.run(Some(RUN_FOR), stop.clone()), b.run(Some(RUN_FOR), stop));
    let (a, b) = (a.unwrap(), b.unwrap());

    let made = runs(&store, "heartbeat").await;
    let last_slot = store.schedule("heartbeat").await.unwrap().next_slot_at;
    let slots = ((last_slot - first_slot).num_seconds() as u64) / EVERY_S;
    assert!(slots >= RUN_FOR.as_secs() / EVERY_S - 2, "{slots} slots in {RUN_FOR:?}");
    assert_eq!(made.len() as u64, slots, "one run per slot: {made:?}");
    assert_eq!(a.slots_fired + b.slots_fired, slots, "each slot fired once: {a:?} {b:?}");
    for (i, run) in made.iter().enumerate() {
        assert_eq!(
            run.0,
            first_slot + chrono::Duration::seconds((i as u64 * EVERY_S) as i64),
            "no slot twice or left out"
        );
    }
    let keys: i64 =
        sqlx::query_scalar("SELECT count(DISTINCT idempotency_key) FROM workflow_runs WHERE schedule_id IS NOT NULL")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(keys as usize, made.len());
    // How late each run was made after its slot (reported, not asserted: a measurement).
    let late: Vec<f64> = sqlx::query_scalar(
        "SELECT extract(epoch FROM created_at - schedule_slot)::float8 FROM workflow_runs WHERE schedule_id IS NOT NULL",
    )
    .fetch_all(store.pool())
    .await
    .unwrap();
    let max = late.iter().cloned().fold(0.0, f64::max);
    let mean = late.iter().sum::<f64>() / late.len() as f64;
    eprintln!(
        "schedules: {} slots by two schedulers (a {}, b {}); lateness mean {mean:.3} s, max {max:.3} s",
        made.len(),
        a.slots_fired,
        b.slots_fired
    );
}

/// A schedule whose inputs are beyond the inline bound: its slot's run keeps them by reference in
/// the artifact store (LocalStack's S3), under the run's prefix, and its step's `$input`
/// pointers read them at claim.
#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_slots_large_inputs_are_stored_by_reference_and_read_at_claim(pool: PgPool) {
    use rara_artifacts::Key;
    let (artifacts, _) = rara_testkit::s3_store("schedules").await;
    let (store, _queues, mut stack) = Stack::fresh(pool, &[("RARA_INLINE_OUTPUT_BYTES", "100")]).await;
    stack.executor = stack.executor.clone().with_artifacts(artifacts.clone(), &stack.settings);
    let flow = "name: big\ninputs: {night: {type: string}, blob: {type: string}}\n\
                steps: [{name: index, operation: noop, input: {n: {$input: /night}, size: {$input: /blob}}}]\n";
    let definition = WorkflowDefinition::parse(flow, Format::Yaml).unwrap();
    store.register_definition("big", &serde_json::to_value(&definition).unwrap()).await.unwrap();
    let blob = "x".repeat(1000);
    let inputs = serde_json::json!({"night": {"$schedule": "/slot_time"}, "blob": blob});
    let new = CreateSchedule {
        name: "big".into(),
        workflow: WorkflowRef { name: "big".into(), version: None },
        spec: Spec::Every(Duration::from_secs(3600)),
        timezone: "UTC".into(),
        inputs: inputs.as_object().unwrap().clone(),
        overlap: Overlap::Skip,
        catchup_window: Duration::from_secs(7200),
        jitter: Duration::ZERO,
    };
    schedules::create(&store, &stack.settings.core, &|_, _| true, new).await.unwrap();
    rewind(&store, "big", 3600).await;
    assert_eq!(stack.scheduler().with_artifacts(artifacts.clone()).pass().await.unwrap().slots_fired, 1);

    let run_id: uuid::Uuid = sqlx::query_scalar("SELECT id FROM workflow_runs").fetch_one(store.pool()).await.unwrap();
    let kept = store.run_inputs(run_id).await.unwrap();
    let descriptor = rara_domain::stored::Descriptor::of(&kept).expect("the run keeps a reference");
    assert_eq!(artifacts.location().key_of(&descriptor.uri).unwrap(), Key::inputs(run_id));
    assert_eq!(stack.run_until_finished(run_id, Duration::from_secs(60)).await.0, "succeeded");
    let slot: DateTime<Utc> =
        sqlx::query_scalar("SELECT schedule_slot FROM workflow_runs").fetch_one(store.pool()).await.unwrap();
    let slot = slot.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let ran: serde_json::Value =
        sqlx::query_scalar("SELECT a.input FROM step_attempts a JOIN steps s ON s.id = a.step_id WHERE s.run_id = $1")
            .bind(run_id)
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(ran, serde_json::json!({"n": slot, "size": blob}));
}
