//! The schedule round's lock on real Postgres: a round holds the due schedules it took, so a
//! second scheduler's round takes none of them until the first commits; a committed advance
//! makes the schedule not due; a name is taken once; registered definitions keep one version per
//! content.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use chrono::Utc;
use rara_store::schedules::{Advance, NewSchedule, ScheduleSpec};
use rara_store::{Error, Store};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

fn due_schedule(name: &str) -> NewSchedule {
    let past = Utc::now() - chrono::Duration::seconds(10);
    NewSchedule {
        id: Uuid::now_v7(),
        name: name.into(),
        spec: ScheduleSpec {
            workflow: "nightly".into(),
            workflow_version: None,
            cron: None,
            every_ms: Some(2000),
            timezone: "UTC".into(),
            inputs: json!({}),
            overlap: "skip".into(),
            catchup_window_ms: 3_600_000,
            jitter_ms: 0,
        },
        next_slot_at: past,
        next_fire_at: past,
    }
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_second_round_skips_the_schedules_the_first_holds(pool: PgPool) {
    let store = Store::new(pool);
    store.create_schedule(&due_schedule("a")).await.unwrap();
    assert!(matches!(store.create_schedule(&due_schedule("a")).await, Err(Error::ScheduleExists(_))));

    let mut first = store.begin_schedule_round(10).await.unwrap();
    assert_eq!(first.due.len(), 1);
    let second = store.begin_schedule_round(10).await.unwrap();
    assert!(second.due.is_empty(), "held by the first round: {second:?}");
    drop(second);
    let later = first.now + chrono::Duration::hours(1);
    let advance = Advance { next_slot_at: later, next_fire_at: later, ..Advance::default() };
    first.advance(first.due[0].id, &advance).await.unwrap();
    first.commit().await.unwrap();
    assert!(store.begin_schedule_round(10).await.unwrap().due.is_empty(), "advanced: not due");

    store.set_schedule_paused("a", true).await.unwrap();
    store.delete_schedule("a").await.unwrap();
    assert!(matches!(store.schedule("a").await, Err(Error::ScheduleNotFound(_))));
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_same_content_is_the_same_version(pool: PgPool) {
    let store = Store::new(pool);
    let v1 = json!({"name": "n", "steps": [{"name": "a", "operation": "noop"}]});
    // The same content written in another order is the same jsonb.
    let v1_again = json!({"steps": [{"operation": "noop", "name": "a"}], "name": "n"});
    let v2 = json!({"name": "n", "steps": [{"name": "b", "operation": "noop"}]});
    let first = store.register_definition("n", &v1).await.unwrap();
    let again = store.register_definition("n", &v1_again).await.unwrap();
    let second = store.register_definition("n", &v2).await.unwrap();
    assert_eq!((first.version, first.created), (1, true));
    assert_eq!((again.version, again.created), (1, false));
    assert_eq!((second.version, second.created), (2, true));
    assert_eq!(store.definition("n", None).await.unwrap().version, 2);
    assert!(matches!(store.definition("n", Some(3)).await, Err(Error::DefinitionNotFound { .. })));
}
