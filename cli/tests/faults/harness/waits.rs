//! The bounded waits for state a scenario needs, and the database reads they use.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::{LEASE_SECONDS, Stack};

impl Stack {
    /// Steps still `leased` or `running` more than one lease (plus the reaper's interval)
    /// after their lease expired: none may exist while a scheduler runs. Each as (name,
    /// status, holder, attempt, seconds past the lease's end), for a failure's message.
    pub async fn overdue_leases(&self) -> Vec<(String, String, String, i32, f64)> {
        sqlx::query_as(
            "SELECT name, status::text, leased_by, attempt, extract(epoch FROM now() - lease_expires_at)::float8
             FROM steps WHERE status IN ('leased', 'running')
             AND lease_expires_at < now() - make_interval(secs => $1)",
        )
        .bind(LEASE_SECONDS as f64 + 1.0)
        .fetch_all(&self.pool)
        .await
        .unwrap()
    }

    /// Waits (bounded by `within`) until no step is held past one lease: the reaper of a
    /// scheduler that reaches Postgres again has given back what the silence left behind.
    pub async fn until_no_overdue_lease(&self, within: Duration) {
        let end = Instant::now() + within;
        loop {
            let overdue = self.overdue_leases().await;
            if overdue.is_empty() {
                break;
            }
            assert!(
                Instant::now() < end,
                "[{}] steps held past one lease {within:?} later: {overdue:?}",
                self.scenario
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits (bounded) until at least `n` steps succeeded.
    pub async fn until_succeeded(&self, n: i64) {
        let end = Instant::now() + Duration::from_secs(30);
        while self.scalar("SELECT count(*) FROM steps WHERE status = 'succeeded'").await < n {
            assert!(Instant::now() < end, "[{}] fewer than {n} steps succeeded within 30 s", self.scenario);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits (bounded) for every run to finish, asserting throughout that no step stays
    /// held past one lease.
    pub async fn until_finished_with_no_overdue_lease(&mut self, bound: Duration) {
        let end = Instant::now() + bound;
        while self.unfinished_runs().await > 0 && Instant::now() < end {
            let overdue = self.overdue_leases().await;
            assert!(overdue.is_empty(), "[{}] a step stayed held past one lease: {overdue:?}", self.scenario);
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// SIGTERM to runner `i`, which must exit with its counters within `grace` + 5 s.
    pub fn stop_within_grace(&mut self, i: usize, grace: u64, facing: &str) -> Duration {
        let stopped = Instant::now();
        let name = self.runners[i].name.clone();
        let counters = self.runners[i].stop().unwrap_or_else(|| panic!("{name} exits with its counters"));
        let took = stopped.elapsed();
        assert!(took <= Duration::from_secs(grace + 5), "{name}: SIGTERM to exit took {took:?} facing {facing}");
        self.ledger.runners.push(counters);
        took
    }

    pub async fn scalar(&self, sql: &'static str) -> i64 {
        sqlx::query_scalar(sql).fetch_one(&self.pool).await.unwrap()
    }

    /// The database's clock now, to compare attempts' start times with.
    pub async fn clock(&self) -> String {
        sqlx::query_scalar("SELECT clock_timestamp()::text").fetch_one(&self.pool).await.unwrap()
    }

    /// Asserts that both executors (`exec-a`, `exec-b`) started attempts after `since`
    /// (a [`clock`](Self::clock) reading).
    pub async fn assert_both_executors_worked_since(&self, since: &str) {
        let started: Vec<(String, i64)> = sqlx::query_as(
            "SELECT leased_by, count(*) FROM step_attempts WHERE started_at > $1::timestamptz GROUP BY leased_by",
        )
        .bind(since)
        .fetch_all(&self.pool)
        .await
        .unwrap();
        let started: HashMap<String, i64> = started.into_iter().collect();
        assert!(started.contains_key("exec-a") && started.contains_key("exec-b"), "both make progress: {started:?}");
    }

    pub async fn unfinished_runs(&self) -> i64 {
        self.scalar("SELECT count(*) FROM workflow_runs WHERE status = 'running'").await
    }

    /// Open attempts of `worker`: (step id, attempt).
    pub async fn open_attempts(&self, worker: &str) -> Vec<(Uuid, i32)> {
        sqlx::query_as("SELECT step_id, attempt FROM step_attempts WHERE leased_by = $1 AND outcome = 'running'")
            .bind(worker)
            .fetch_all(&self.pool)
            .await
            .unwrap()
    }

    /// Waits (bounded) until `worker` holds a claimed, unrecorded step.
    pub async fn until_claimed(&self, worker: &str) -> Vec<(Uuid, i32)> {
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            let open = self.open_attempts(worker).await;
            if !open.is_empty() {
                return open;
            }
            assert!(Instant::now() < end, "{worker} claimed nothing within 20 s");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits (bounded) for every run to finish; fails early when no executor is left alive.
    pub async fn until_finished(&mut self, bound: Duration) {
        let end = Instant::now() + bound;
        while self.unfinished_runs().await > 0 {
            self.supervise();
            if Instant::now() > end {
                self.notes.push(format!("runs still unfinished after {} s", bound.as_secs()));
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
