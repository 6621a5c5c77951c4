//! The fault suite: "nothing lost, nothing run twice", proven on real processes. Each
//! scenario runs `rara scheduler` and `rara executor` as child processes against a scratch
//! database and LocalStack's SQS, injects one kind of fault (SIGKILL, SIGSTOP past the lease,
//! duplicate and stale messages, killed Postgres connections, poison messages, a long
//! transaction, a silent peer in front of SQS, Postgres or the Python executor), lets the run
//! finish, stops the runners (they print their counters as JSON) and hands the history to
//! `rara_testkit::history`, which must find no violation.
//!
//! Every scenario prints its seed (`RARA_FAULT_SEED=<seed>` replays the workflow shapes and
//! the fault timings) and a summary line, also appended to `target/fault-summary.txt`.
//! The Python executor killed mid-stream is covered by
//! `shared/runtime/tests/remote_end_to_end.rs`; scenario 11 restarts it while long remote
//! attempts run detached (DESIGN.md "Long steps").
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "faults/harness/mod.rs"]
mod harness;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use common::ScratchDb;
use harness::{LEASE_SECONDS, POSTGRES, RUN_BOUND, Shape, Stack, restart_postgres, runners_through_a_postgres_peer};
use rand::Rng;
use rara_queue::StepMessage;
use rara_runtime::metrics::Counters;
use rara_store::Store;
use rara_testkit::history::{self, Ledger};
use rara_testkit::{SilentPeer, endpoint_addr};
use sqlx::postgres::PgPoolOptions;
use uuid::Uuid;

/// 1. Executors SIGKILLed after they claimed steps and before recording: the steps are taken
///    over or reaped once the lease expires and end with exactly one committed outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_executor_steps_are_taken_over_and_end_once() {
    let mut s = Stack::new("1-sigkill-executor").await;
    s.submit(20, Shape::Diamond).await;
    s.spawn_scheduler();
    let mut orphans = Vec::new();
    for round in 0..3 {
        let name = format!("victim-{round}");
        let victim = s.spawn("executor", &name);
        s.until_claimed(&name).await;
        let pause = s.rng.random_range(100..600);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        s.kill(victim);
        // A commit the victim sent before the signal may still land: let it, then what is still
        // open was claimed and never recorded.
        tokio::time::sleep(Duration::from_millis(300)).await;
        orphans.extend(s.open_attempts(&name).await);
    }
    assert!(!orphans.is_empty(), "the kills hit claimed, unrecorded steps");
    s.spawn("executor", "survivor-1");
    s.spawn("executor", "survivor-2");
    let done = s.finish().await;
    for (step_id, attempt) in &orphans {
        let attempts = done.attempts_of(*step_id).await;
        let (_, _, outcome) = &attempts[(*attempt - 1) as usize];
        assert_eq!(outcome, "lease_expired", "the killed holder's attempt of {step_id}: {attempts:?}");
        assert!(attempts.len() > *attempt as usize, "someone ran {step_id} after the kill: {attempts:?}");
    }
    println!("[1-sigkill-executor] {} orphaned attempts taken over or reaped", orphans.len());
}

/// 11. Long remote steps detached from the executors' short invocations (4 s): an executor
///     SIGKILLed while attached, the Python executor restarted while attempts run detached
///     (they are lost: `ATTEMPT_NOT_FOUND`, a new attempt under a new fence), parked messages
///     coming back to other executors. Every step ends once, with the checker's invariants.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_remote_steps_survive_killed_executors_and_a_restarted_python_executor() {
    let mut python = rara_testkit::PythonServer::start();
    let port = python.port();
    let mut s = Stack::new("11-detached-long-steps").await;
    s.submit(6, Shape::Remote).await;
    s.spawn_scheduler();
    let env = vec![
        ("RARA_REMOTE_EXECUTORS", python.url().to_owned()),
        ("RARA_FUNCTION_TIMEOUT_SECONDS", "4".into()),
        ("RARA_DEADLINE_MARGIN_MS", "1000".into()),
        ("RARA_REATTACH_INTERVAL_SECONDS", "1".into()),
    ];
    let victim = s.spawn_with("executor", "victim", &env);
    s.until_claimed("victim").await;
    tokio::time::sleep(Duration::from_millis(s.rng.random_range(500..2500))).await;
    s.kill(victim);
    s.spawn_with("executor", "survivor-1", &env);
    s.spawn_with("executor", "survivor-2", &env);
    // Once attempts run detached, lose every one the Python executor holds.
    let end = Instant::now() + Duration::from_secs(30);
    let detached = loop {
        let detached: i64 =
            sqlx::query_scalar("SELECT count(*) FROM steps WHERE status = 'leased' AND remote_endpoint IS NOT NULL")
                .fetch_one(&s.pool)
                .await
                .unwrap();
        if detached > 0 {
            break detached;
        }
        assert!(Instant::now() < end, "no attempt was parked within 30 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    python.kill();
    s.faults += 1;
    s.notes.push(format!("the Python executor restarted with {detached} attempt(s) detached"));
    let _python = rara_testkit::PythonServer::start_on(port);
    let done = s.finish().await;
    let (succeeded, lost): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM steps WHERE status = 'succeeded'),
                (SELECT count(*) FROM step_attempts WHERE error->>'code' = 'ATTEMPT_NOT_FOUND')",
    )
    .fetch_one(&done.pool)
    .await
    .unwrap();
    assert_eq!(succeeded, 6, "every long step succeeded");
    let spans: i64 =
        sqlx::query_scalar("SELECT coalesce(sum(jsonb_array_length(detached_spans)), 0) FROM step_attempts")
            .fetch_one(&done.pool)
            .await
            .unwrap();
    assert!(spans > 0, "attempts were parked and re-attached");
    println!("[11-detached-long-steps] {spans} detached stretches, {lost} attempt(s) lost with the Python executor");
}

/// 2. An executor paused (SIGSTOP) past its lease, then resumed (SIGCONT): another executor
///    completes its steps, and its late writes are rejected by the fence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_executor_late_writes_are_fenced_out() {
    let mut s = Stack::new("2-sigstop-executor").await;
    s.submit(20, Shape::Diamond).await;
    s.spawn_scheduler();
    let paused = s.spawn("executor", "paused");
    s.until_claimed("paused").await;
    s.spawn("executor", "steady");
    s.runners[paused].signal("STOP");
    s.ledger.pauses += 1;
    s.faults += 1;
    let stopped = Instant::now();
    // What it holds now, stopped, was claimed and not recorded.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let held = s.open_attempts("paused").await;
    assert!(!held.is_empty(), "paused while holding claimed steps");
    // Stay paused until the steps it held were finished by someone else (bounded).
    let end = Instant::now() + Duration::from_secs(40);
    loop {
        let mut finished = 0;
        for (step_id, _) in &held {
            let status: String = sqlx::query_scalar("SELECT status::text FROM steps WHERE id = $1")
                .bind(step_id)
                .fetch_one(&s.pool)
                .await
                .unwrap();
            finished += usize::from(matches!(status.as_str(), "succeeded" | "failed"));
        }
        if finished == held.len() || Instant::now() > end {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(stopped.elapsed() > Duration::from_secs(LEASE_SECONDS), "paused past the lease");
    s.runners[paused].signal("CONT");
    let done = s.finish().await;
    let counters = done.report.counters;
    for (step_id, attempt) in &held {
        let attempts = done.attempts_of(*step_id).await;
        let (_, by, outcome) = &attempts[(*attempt - 1) as usize];
        assert_eq!((by.as_str(), outcome.as_str()), ("paused", "lease_expired"), "{step_id}: {attempts:?}");
        let successes: Vec<_> = attempts.iter().filter(|(_, _, o)| o == "succeeded").collect();
        assert_eq!(successes.len(), 1, "exactly one success for {step_id}: {attempts:?}");
        assert_eq!(successes[0].1, "steady", "the other executor completed {step_id}");
    }
    let paused_outcomes = done.outcomes_of("paused").await;
    assert!(paused_outcomes.iter().all(|(_, _, o)| o != "running"));
    // The resumed executor tried to heartbeat or record, and the fence said no.
    assert!(counters.lease_lost >= held.len() as u64, "late writes rejected: {counters:?}");
    println!(
        "[2-sigstop-executor] {} steps held by the paused executor, lease_lost {}",
        held.len(),
        counters.lease_lost
    );
}

/// 3. The same message delivered twice: at the same time (a duplicate sent as soon as the
///    step is leased) and one after the other (every message sent again after the runs end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_deliveries_run_nothing_twice() {
    let mut s = Stack::new("3-duplicate-messages").await;
    s.submit(20, Shape::Diamond).await;
    s.spawn_scheduler();
    s.spawn("executor", "exec-a");
    s.spawn("executor", "exec-b");
    let mut seen: HashSet<(Uuid, Uuid)> = HashSet::new();
    let end = Instant::now() + RUN_BOUND;
    while s.unfinished_runs().await > 0 && Instant::now() < end {
        let leased: Vec<(Uuid, Uuid)> = sqlx::query_as("SELECT id, lease_token FROM steps WHERE status = 'leased'")
            .fetch_all(&s.pool)
            .await
            .unwrap();
        let mut bodies = Vec::new();
        for pair in leased {
            if seen.insert(pair) {
                let copies = s.rng.random_range(1..=2);
                for _ in 0..copies {
                    bodies.push(StepMessage::new(pair.0, pair.1).to_body());
                }
            }
        }
        if !bodies.is_empty() {
            s.faults += bodies.len() as u64;
            s.inject(&bodies).await;
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    // One after the other: the runs are over, every message comes again.
    let again: Vec<String> = seen.iter().map(|(step, token)| StepMessage::new(*step, *token).to_body()).collect();
    s.faults += again.len() as u64;
    s.inject(&again).await;
    s.until_drained(Duration::from_secs(20)).await;
    let done = s.finish().await;
    done.assert_nothing_ran_twice();
    assert!(done.report.counters.stale >= again.len() as u64, "{:?}", done.report.counters);
}

/// 10. A silent SQS (it accepts connections and never answers) in front of the real
///     `rara scheduler`: SIGTERM ends it within its grace + 5 s, with every lease it took
///     released; then SQS answers again and a normal stack finishes every run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_facing_a_silent_sqs_exits_within_its_grace_and_releases_what_it_leased() {
    const GRACE: u64 = 1;
    let mut s = Stack::new("10-silent-sqs-scheduler").await;
    let peer = SilentPeer::start(endpoint_addr(), true).await;
    s.submit(10, Shape::FanOut).await;
    let silent = s.spawn_with(
        "scheduler",
        "silent-scheduler",
        &[("AWS_ENDPOINT_URL", peer.url()), ("RARA_SHUTDOWN_GRACE_SECONDS", GRACE.to_string())],
    );
    // It leases the roots and hangs on sending their messages.
    let end = Instant::now() + Duration::from_secs(10);
    while s.scalar("SELECT count(*) FROM steps WHERE status = 'leased'").await == 0 {
        assert!(Instant::now() < end, "the scheduler leased nothing");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let stopped = Instant::now();
    let counters = s.runners[silent].stop().expect("the scheduler exits with its counters");
    let took = stopped.elapsed();
    assert!(took <= Duration::from_secs(GRACE + 5), "SIGTERM to exit took {took:?}");
    assert_eq!((counters.sent, counters.released), (0, counters.leased), "{counters:?}");
    assert_eq!(s.scalar("SELECT count(*) FROM steps WHERE status = 'leased'").await, 0, "no step stays leased");
    s.notes.push(format!("SIGTERM to exit {:.1} s facing a silent SQS (grace {GRACE} s)", took.as_secs_f64()));
    s.ledger.runners.push(counters);
    s.faults += 1;
    // SQS answers again: the normal stack runs everything.
    s.spawn_scheduler();
    s.spawn("executor", "exec-a");
    let done = s.finish().await;
    done.assert_nothing_ran_twice();
}

/// 4. Messages carrying an older lease token after the step was re-leased: the original
///    messages are lost (the test deletes them), the reaper and the scheduler lease the steps
///    again with new tokens, then the old messages arrive. They are stale and run nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn older_lease_tokens_are_stale_after_a_new_lease() {
    let mut s = Stack::new("4-older-lease-token").await;
    s.submit(20, Shape::Diamond).await;
    s.spawn_scheduler();
    // The scheduler leases the 20 roots; take their messages off the queue before any
    // executor sees them.
    let end = Instant::now() + Duration::from_secs(20);
    let mut first: HashMap<Uuid, Uuid> = HashMap::new();
    while first.len() < 20 {
        assert!(Instant::now() < end, "only {} roots were leased and sent", first.len());
        let received = s
            .queues
            .client
            .receive_message()
            .queue_url(&s.queues.url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap()
            .messages
            .unwrap_or_default();
        for m in received {
            for step in rara_queue::parse_steps(m.body().unwrap()).unwrap() {
                first.insert(step.message.step_id, step.message.lease_token);
            }
            s.queues
                .client
                .delete_message()
                .queue_url(&s.queues.url)
                .receipt_handle(m.receipt_handle().unwrap())
                .send()
                .await
                .unwrap();
            s.ledger.removed_by_test += 1;
        }
    }
    // Wait for every one of them to be leased again under a new token (the reaper, once the
    // delivery timeout of 30 s has passed, then the scheduler).
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let mut releases = 0;
        for (step, token) in &first {
            let now: Option<Uuid> = sqlx::query_scalar("SELECT lease_token FROM steps WHERE id = $1")
                .bind(step)
                .fetch_one(&s.pool)
                .await
                .unwrap();
            releases += usize::from(now.is_some_and(|now| now != *token));
        }
        if releases == first.len() {
            break;
        }
        assert!(Instant::now() < end, "only {releases} of {} steps were leased again", first.len());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    s.spawn("executor", "exec-a");
    s.spawn("executor", "exec-b");
    let old: Vec<String> = first.iter().map(|(step, token)| StepMessage::new(*step, *token).to_body()).collect();
    s.faults += old.len() as u64;
    s.inject(&old).await;
    let done = s.finish().await;
    done.assert_nothing_ran_twice();
    assert!(done.report.counters.stale >= old.len() as u64, "{:?}", done.report.counters);
}

/// 5. Postgres connections killed several times mid-run: no runner wedges or dies (the
///    scheduler retries a pass that lost its connection), every step ends terminal, no
///    duplicate outcome; afterwards both executors still make progress.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_database_connections_wedge_nothing() {
    let mut s = Stack::new("5-pg-terminate-backend").await;
    s.submit(20, Shape::Diamond).await;
    s.spawn_scheduler();
    let a = s.spawn("executor", "exec-a");
    let b = s.spawn("executor", "exec-b");
    let terminate = "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                     WHERE datname = current_database() AND pid <> pg_backend_pid()";
    for _ in 0..6 {
        let pause = s.rng.random_range(400..1200);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let killed = s.scalar(terminate).await;
        s.faults += 1;
        println!("[5-pg-terminate-backend] terminated {killed} connections");
        s.supervise();
    }
    // After the faults: new work, and both executors must take part in it (30 steps of
    // 1.5 s: one executor holds at most a batch of 10 at a time).
    let after = s.clock().await;
    s.submit(30, Shape::Sleeper).await;
    s.until_finished(RUN_BOUND).await;
    assert!(s.runners[a].alive() && s.runners[b].alive(), "no executor exited");
    s.assert_both_executors_worked_since(&after).await;
    s.finish().await;
}

/// 7. Poison messages (malformed, unknown version, unknown step, a 200 KB body) all end on the
///    DLQ with their reason, and no executor crashes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_messages_end_in_the_dlq_with_a_reason() {
    let mut s = Stack::new("7-poison-messages").await;
    s.submit(10, Shape::Diamond).await;
    s.spawn_scheduler();
    let a = s.spawn("executor", "exec-a");
    let b = s.spawn("executor", "exec-b");
    let mut poison = Vec::new();
    for _ in 0..3 {
        let (step, token) = (Uuid::new_v4(), Uuid::new_v4());
        poison.push("{\"v\":1,\"step_id\":".to_owned());
        poison.push(format!(r#"{{"v":3,"step_id":"{step}","lease_token":"{token}"}}"#));
        poison.push(StepMessage::new(step, token).to_body());
        poison.push(format!(
            r#"{{"v":1,"step_id":"{step}","lease_token":"{token}","pad":"{}"}}"#,
            "x".repeat(200 * 1024)
        ));
    }
    s.faults += poison.len() as u64;
    s.inject(&poison).await;
    s.until_finished(RUN_BOUND).await;
    s.until_drained(Duration::from_secs(10)).await;
    assert!(s.runners[a].alive() && s.runners[b].alive(), "no executor crashed");
    let done = s.finish().await;
    done.assert_nothing_ran_twice();
    let mut codes: HashMap<String, usize> = HashMap::new();
    for (_, code) in &done.dead_letters {
        *codes.entry(code.clone().unwrap_or_else(|| "<no reason>".into())).or_default() += 1;
    }
    let expected: HashMap<String, usize> =
        ["MALFORMED_MESSAGE", "UNSUPPORTED_MESSAGE_VERSION", "UNKNOWN_STEP", "MESSAGE_TOO_LARGE"]
            .into_iter()
            .map(|c| (c.to_owned(), 3))
            .collect();
    assert_eq!(codes, expected, "every poison message on the DLQ with its reason");
    assert_eq!(done.report.counters.dead_lettered, poison.len() as u64);
}

/// 12. Postgres goes silent (a black hole in front of it: connections accepted, nothing
///     answered) under a running scheduler and two executors: SIGTERM ends each within its
///     grace + 5 s. When the peer speaks again a fresh scheduler and executor finish every
///     run: every step ends exactly once, no step stays held past one lease once the
///     reaper reaches Postgres, and the checker's invariants hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runners_facing_a_silent_postgres_exit_within_their_grace_and_lose_nothing() {
    const GRACE: u64 = 1;
    let mut s = Stack::new("12-silent-postgres-sigterm").await;
    let (peer, env, runners) = runners_through_a_postgres_peer(&mut s, GRACE).await;
    peer.set_silent(true);
    s.faults += 1;
    s.ledger.postgres_silences += 1;
    let held = s.scalar("SELECT count(*) FROM steps WHERE status IN ('leased', 'running')").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut slowest = Duration::ZERO;
    for i in runners {
        slowest = slowest.max(s.stop_within_grace(i, GRACE, "a silent Postgres"));
    }
    s.notes.push(format!(
        "Postgres silent with {held} steps held; SIGTERM to exit at most {:.1} s (grace {GRACE} s)",
        slowest.as_secs_f64()
    ));
    // The peer speaks again: fresh runners, through it, finish every run.
    peer.set_silent(false);
    s.spawn_with("scheduler", "scheduler-2", &env);
    s.spawn_with("executor", "exec-c", &env);
    s.until_no_overdue_lease(Duration::from_secs(10)).await;
    s.until_finished_with_no_overdue_lease(RUN_BOUND).await;
    let done = s.finish().await;
    // Only what was in flight when Postgres went silent may have run again.
    let extra = done.report.attempts.saturating_sub(done.expected_attempts);
    assert!(extra <= held as u64, "{extra} extra attempts, {held} steps held at the silence");
}

/// 13. Postgres goes silent for longer than a lease under a running scheduler and two
///     executors, with their calls in flight (held by a table lock, so the answers are lost),
///     then speaks again, and nobody restarts anything: no runner exits, both
///     executors take part in new work, no step stays held past one lease once the reaper
///     reaches Postgres, and the checker's invariants hold.
///
///     The peer holds what is sent during the silence and delivers it late, as TCP does once
///     a partition heals: a connection whose call was given up client-side gets its lost
///     answers and goes back to its pool clean. (An earlier peer dropped those bytes, which
///     TCP never does; the connections then waited forever for their answers and the pools
///     stayed exhausted.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runners_resume_without_a_restart_when_a_silent_postgres_speaks_again() {
    let mut s = Stack::new("13-silent-postgres-resume").await;
    let (peer, _env, runners) = runners_through_a_postgres_peer(&mut s, 1).await;
    // Catch the runners' calls in flight: a lock on `steps` holds every statement on it at
    // the server; the peer goes silent; the lock goes, and the answers to those calls are
    // lost in the black hole. Only a client-side deadline ends such a call.
    let mut lock = s.pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE steps IN ACCESS EXCLUSIVE MODE").execute(&mut *lock).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let blocked: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
    )
    .fetch_one(&mut *lock)
    .await
    .unwrap();
    peer.set_silent(true);
    lock.rollback().await.unwrap();
    s.faults += 1;
    s.ledger.postgres_silences += 1;
    let silence = Duration::from_secs(LEASE_SECONDS + 3);
    tokio::time::sleep(silence).await;
    peer.set_silent(false);
    let spoke = s.clock().await;
    assert!(blocked > 0, "runner calls were in flight when the peer went silent");
    s.notes.push(format!(
        "Postgres silent for {} s with {blocked} runner calls in flight, then answering again; no restart",
        silence.as_secs()
    ));
    // New work after the silence, for both executors (30 steps of 1.5 s: one executor holds
    // at most a batch of 10 at a time).
    s.submit(30, Shape::Sleeper).await;
    s.until_no_overdue_lease(Duration::from_secs(40)).await;
    s.until_finished_with_no_overdue_lease(RUN_BOUND).await;
    for i in runners {
        assert!(s.runners[i].alive(), "{} is still running", s.runners[i].name);
    }
    s.assert_both_executors_worked_since(&spoke).await;
    s.finish().await;
}

/// 14. The remote (Python) executor goes silent behind a black hole while remote steps are
///     in flight: each fails retryably (`EXECUTOR_UNAVAILABLE`) within the keep-alive bound,
///     an executor SIGTERMed meanwhile exits within its grace + 5 s, and when the peer
///     speaks again the retries succeed on the executor left running, with nothing
///     restarted; the checker's invariants hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_steps_facing_a_silent_executor_fail_retryably_and_succeed_when_it_answers() {
    const GRACE: u64 = 1;
    let python = rara_testkit::PythonServer::start();
    let python_addr: std::net::SocketAddr = format!("127.0.0.1:{}", python.port()).parse().unwrap();
    let peer = SilentPeer::start(python_addr, false).await;
    let mut s = Stack::new("14-silent-remote-executor").await;
    for i in 0..4 {
        let yaml = format!(
            "name: remote-{i}\nsteps:\n- {{name: train, operation: sleep, version: \"1.0.0\", \
             input: {{seconds: 4}}, timeout_seconds: 60, max_attempts: 5, \
             retry: {{initial_delay_seconds: 2, max_delay_seconds: 4}}}}\n"
        );
        // At least one attempt each; the silence makes more (counted, not asserted).
        s.submit_yaml(&yaml, 1).await;
    }
    let env = vec![
        ("RARA_REMOTE_EXECUTORS", peer.url()),
        ("RARA_SHUTDOWN_GRACE_SECONDS", GRACE.to_string()),
        ("RARA_GRPC_CONNECT_TIMEOUT_MS", "1000".into()),
        ("RARA_GRPC_KEEPALIVE_INTERVAL_MS", "500".into()),
        ("RARA_GRPC_KEEPALIVE_TIMEOUT_MS", "1000".into()),
    ];
    s.spawn_scheduler();
    let victim = s.spawn_with("executor", "victim", &env);
    let steady = s.spawn_with("executor", "steady", &env);
    // Remote steps under way, then silence.
    let end = Instant::now() + Duration::from_secs(30);
    while s.scalar("SELECT count(*) FROM steps WHERE status = 'running'").await < 2 {
        assert!(Instant::now() < end, "no remote steps running within 30 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    peer.set_silent(true);
    let silent_at = Instant::now();
    s.faults += 1;
    // Keep-alive bound: interval + timeout, plus the time to record the failure.
    let bound = Duration::from_millis(500 + 1000) + Duration::from_secs(3);
    let unavailable = "SELECT count(*) FROM step_attempts WHERE error->>'code' = 'EXECUTOR_UNAVAILABLE'
                       AND error->>'retryable' = 'true'";
    while s.scalar(unavailable).await == 0 {
        assert!(silent_at.elapsed() < bound, "no attempt failed as EXECUTOR_UNAVAILABLE within {bound:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let failed_after = silent_at.elapsed();
    let took = s.stop_within_grace(victim, GRACE, "a silent remote executor");
    tokio::time::sleep(Duration::from_secs(1)).await;
    peer.set_silent(false);
    s.notes.push(format!(
        "first EXECUTOR_UNAVAILABLE {:.1} s into the silence; SIGTERM to exit {:.1} s (grace {GRACE} s)",
        failed_after.as_secs_f64(),
        took.as_secs_f64()
    ));
    s.until_finished_with_no_overdue_lease(RUN_BOUND).await;
    assert!(s.runners[steady].alive(), "the executor left running was not restarted");
    let done = s.finish().await;
    let succeeded: i64 = sqlx::query_scalar("SELECT count(*) FROM steps WHERE status = 'succeeded'")
        .fetch_one(&done.pool)
        .await
        .unwrap();
    assert_eq!(succeeded, 4, "every remote step succeeded once the executor answered again");
    drop(python);
}

/// 9. Postgres restarted in the middle of a run: no runner wedges or dies, no step is lost,
///    and outcomes whose commit was cut off are resolved by the claim (a committed one is
///    stale on redelivery, an uncommitted one is taken over after the lease and runs again):
///    no step has two committed outcomes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_restart_mid_run_loses_nothing() {
    let mut s = Stack::exclusive("9-postgres-restart").await;
    s.submit(20, Shape::Diamond).await;
    s.spawn_scheduler();
    let a = s.spawn("executor", "exec-a");
    let b = s.spawn("executor", "exec-b");
    let pause = s.rng.random_range(800..1600);
    tokio::time::sleep(Duration::from_millis(pause)).await;
    let before = s.scalar("SELECT count(*) FROM steps WHERE status = 'succeeded'").await;
    restart_postgres();
    s.faults += 1;
    s.notes.push(format!("restarted Postgres after {pause} ms with {before} steps succeeded"));
    s.until_finished(RUN_BOUND).await;
    s.supervise();
    assert!(s.runners[a].alive() && s.runners[b].alive(), "no executor exited");
    let done = s.finish().await;
    // An execution whose outcome write was cut off never committed: the step runs again
    // (at least once), bounded by what was in flight (2 executors x a batch of 10); the
    // history check in `finish` proved no step has two committed outcomes.
    let extra = done.report.attempts.saturating_sub(done.expected_attempts);
    assert!(extra <= 20, "{extra} extra attempts after one restart");
}

/// 8. A long transaction holds back vacuum (an open snapshot with a transaction id) while a
///    run of 200 steps completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_transaction_does_not_stop_a_run() {
    let mut s = Stack::new("8-long-transaction").await;
    let mut long = s.pool.begin().await.unwrap();
    let xid: i64 = sqlx::query_scalar("SELECT txid_current()").fetch_one(&mut *long).await.unwrap();
    s.faults += 1;
    s.submit(40, Shape::FanOut).await;
    s.spawn_scheduler();
    s.spawn("executor", "exec-a");
    s.spawn("executor", "exec-b");
    s.until_finished(RUN_BOUND).await;
    // The transaction was open (holding the xmin horizon) for the whole run.
    let still: i64 = sqlx::query_scalar("SELECT txid_current()").fetch_one(&mut *long).await.unwrap();
    assert_eq!(still, xid, "the same transaction held on throughout");
    let dead: i64 =
        s.scalar("SELECT coalesce(sum(n_dead_tup), 0)::bigint FROM pg_stat_user_tables WHERE relname = 'steps'").await;
    s.notes.push(format!("transaction {xid} open throughout; steps n_dead_tup {dead}"));
    long.rollback().await.unwrap();
    let done = s.finish().await;
    assert_eq!(done.report.steps, 200);
    done.assert_nothing_ran_twice();
}

/// The checker can fail: a success written without the fence (a "test-only store", raw SQL),
/// after another holder took the step over and succeeded, is a duplicate outcome; a fence
/// that went backwards and a message nobody acknowledged are reported too.
#[tokio::test]
async fn the_checker_reports_a_success_written_without_the_fence() {
    use rara_store::claim::{ClaimOutcome, ClaimRequest};
    let _postgres = POSTGRES.read().await;
    let db = ScratchDb::new();
    assert!(db.rara(&["migrate"]).status.success());
    let pool = PgPoolOptions::new().max_connections(2).connect(&db.url).await.unwrap();
    let store = Store::new(pool.clone());
    let plan = rara_domain::workflow::WorkflowDefinition::parse(
        "name: one\nsteps:\n  - {name: a, operation: noop}\n",
        rara_domain::workflow::Format::Yaml,
    )
    .unwrap()
    .plan(&rara_domain::config::Config::from_lookup("test", |_| None).unwrap())
    .unwrap();
    store.submit(&plan).await.unwrap();
    let lease = Duration::from_secs(60);
    let leased = store.lease_due("scheduler", 10, lease).await.unwrap().remove(0);
    let request = ClaimRequest { step_id: leased.step_id, lease_token: leased.lease_token };
    let claim = |worker: &'static str| {
        let store = store.clone();
        async move {
            match store.claim(worker, &[request], lease).await.unwrap().remove(0) {
                ClaimOutcome::Claimed(step) => *step,
                other => panic!("{worker} could not claim: {other:?}"),
            }
        }
    };
    let first = claim("holder-a").await;
    sqlx::query("UPDATE steps SET lease_expires_at = now() - interval '1 second' WHERE id = $1")
        .bind(leased.step_id)
        .execute(&pool)
        .await
        .unwrap();
    let second = claim("holder-b").await;
    store.succeed(&[(second.holder.clone(), serde_json::json!({}))]).await.unwrap().remove(0).unwrap();
    let clean = history::check(&pool, &Ledger::default()).await.unwrap();
    assert!(clean.check().is_empty(), "a clean history: {:?}", clean.check());

    // The broken store: holder-a's late success, without the fence condition.
    sqlx::query("UPDATE step_attempts SET outcome = 'succeeded' WHERE step_id = $1 AND fence = $2")
        .bind(leased.step_id)
        .bind(first.holder.fence)
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("UPDATE steps SET status = 'succeeded', output = '{}' WHERE id = $1")
        .bind(leased.step_id)
        .execute(&pool)
        .await
        .unwrap();
    let broken = history::check(&pool, &Ledger::default()).await.unwrap();
    let rules: Vec<&str> = broken.check().iter().map(|v| v.rule).collect();
    assert!(rules.contains(&"at most one committed outcome per step"), "{rules:?}");
    assert_eq!(broken.duplicate_outcomes, 1);

    // A fence that went backwards, and a message sent that nobody accounts for.
    sqlx::query("UPDATE step_attempts SET fence = 0 WHERE step_id = $1 AND attempt = 2")
        .bind(leased.step_id)
        .execute(&pool)
        .await
        .unwrap();
    let ledger = Ledger {
        runners: vec![Counters { leased: 1, sent: 1, messages: 1, ..Counters::default() }],
        ..Ledger::default()
    };
    let broken = history::check(&pool, &ledger).await.unwrap();
    let rules: Vec<&str> = broken.check().iter().map(|v| v.rule).collect();
    assert!(rules.contains(&"fences strictly grow per step"), "{rules:?}");
    assert!(rules.contains(&"every message is accounted for"), "{rules:?}");
    assert_eq!(broken.messages_unaccounted, 1);
    pool.close().await;
}
