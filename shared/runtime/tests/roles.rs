//! The scheduler, the executor and the console each under their own database role
//! (migration `…000021_roles.sql`), doing their real work on Postgres + LocalStack's SQS: the
//! console submits a run and registers its listener, the scheduler leases, the executor runs,
//! the console reads the run, cancels it while a step runs (the holder stops it), retries the
//! cancelled step and pauses the run. None of them owns a table.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use rara_platform::runner::run_executor;
use rara_queue::Queue;
use rara_store::flow::PauseTarget;
use rara_store::{Store, roles};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

/// A store on the test's database acting as `role`, with rara's pool options.
async fn store_as(pool: &PgPool, role: &str) -> Store {
    let options = roles::acting_as(pool.connect_options().as_ref().clone(), role);
    Store::new(rara_store::pool_options().max_connections(4).connect_with(options).await.unwrap())
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn scheduler_executor_and_console_do_their_work_under_their_own_roles(pool: PgPool) {
    let runtime = store_as(&pool, roles::RUNTIME).await;
    let console = store_as(&pool, roles::CONSOLE).await;
    for (store, role) in [(&runtime, roles::RUNTIME), (&console, roles::CONSOLE)] {
        let acting: String = sqlx::query_scalar("SELECT current_user::text").fetch_one(store.pool()).await.unwrap();
        assert_eq!(acting, role);
    }
    let queues = Queues::new(30, 10).await;
    let stack = Stack::new(runtime.clone(), &queues, settings(&queues, &[])).await;

    // The console: a listener (its triggers turned on as their owner), then a submission.
    console.register_console_listener(uuid::Uuid::new_v4(), Duration::from_secs(60)).await.unwrap();
    let run_id = submit(
        &console,
        &stack.settings,
        "name: roles\nsteps:\n  - {name: a, operation: noop}\n  - {name: b, operation: sleep, input: {seconds: 30}, depends_on: [a]}\n",
    )
    .await;

    // The scheduler and the executor, on the runtime's role.
    let stop = CancellationToken::new();
    let scheduler = stack.scheduler();
    let sched = tokio::spawn({
        let stop = stop.clone();
        async move { scheduler.run(None, stop).await }
    });
    let executor = stack.executor.clone();
    let queue: Arc<dyn Queue> = stack.queue.clone();
    let options = stack.runner_options(None);
    let exec = tokio::spawn({
        let stop = stop.clone();
        async move { run_executor(&executor, queue, &options, stop).await }
    });

    // The console reads the run while b runs, then cancels the run.
    let b = eventually_within("b runs", Duration::from_secs(30), || async {
        let run = console.run(run_id).await.unwrap();
        match run.steps.iter().find(|s| s.name == "b") {
            Some(b) if b.status.as_str() == "running" => Ok(b.id),
            other => Err(other.map(|b| b.status)),
        }
    })
    .await;
    let cancelled = rara_operator::cancel::cancel(&console, run_id, "roles test").await.unwrap();
    assert_eq!((cancelled.kind, cancelled.steps), ("run", 1));
    eventually_within("the executor stops b", Duration::from_secs(20), || async {
        let attempts: Vec<String> =
            sqlx::query_scalar("SELECT outcome::text FROM step_attempts WHERE step_id = $1 AND outcome IS NOT NULL")
                .bind(b)
                .fetch_all(&pool)
                .await
                .unwrap();
        if attempts.is_empty() { Err(attempts) } else { Ok(()) }
    })
    .await;
    let run = console.run(run_id).await.unwrap();
    assert_eq!(run.status.as_str(), "cancelled");
    let status = |name: &str| run.steps.iter().find(|s| s.name == name).unwrap().status;
    assert_eq!((status("a").as_str(), status("b").as_str()), ("succeeded", "cancelled"));

    // An operator's retry and flow control, from the console's role; the pause holds it back.
    console.pause(&PauseTarget::Run(run_id)).await.unwrap();
    assert_eq!(console.retry_step(b).await.unwrap(), 1);
    assert_eq!(console.run(run_id).await.unwrap().status.as_str(), "running");
    console.set_limit("roles-*", Some(2), None).await.unwrap();

    stop.cancel();
    sched.await.unwrap().unwrap();
    let counters = exec.await.unwrap().unwrap();
    assert_eq!(counters.succeeded, 1, "a ran under the runtime's role");
    assert_eq!(step_status(&Store::new(pool), run_id, "b").await, "pending", "retried, and paused");
}
