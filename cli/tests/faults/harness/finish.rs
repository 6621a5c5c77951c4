//! The end of a scenario: [`Stack::finish`] stops the runners, measures the queues and checks
//! the history; [`Finished`] is what the scenario asserts on afterwards.

use std::io::Write;

use rara_testkit::history::{self, Report};
use sqlx::PgPool;
use uuid::Uuid;

use super::{RUN_BOUND, Stack, target_dir};
use crate::common::ScratchDb;

impl Stack {
    /// Waits for the runs, stops every runner (collecting counters), measures the queues,
    /// checks the history, prints and appends the summary line, and asserts a clean history.
    pub async fn finish(mut self) -> Finished {
        self.until_finished(RUN_BOUND).await;
        if self.scheduler_restarts > 0 {
            self.notes.push(format!(
                "the scheduler exited {} times (restarted as its schedule would)",
                self.scheduler_restarts
            ));
        }
        let mut unclean = Vec::new();
        for (i, runner) in self.runners.iter_mut().enumerate() {
            if runner.child.is_none() {
                continue;
            }
            match runner.stop() {
                Some(c) => self.ledger.runners.push(c),
                None if Some(i) == self.scheduler => self.ledger.lost_schedulers += 1,
                None => {
                    self.ledger.killed_executors += 1;
                    unclean.push(runner.name.clone());
                }
            }
        }
        if !unclean.is_empty() {
            self.notes.push(format!("exited without counters: {}", unclean.join(", ")));
        }
        self.ledger.left_on_queue = self.queue_depth().await;
        let dead_letters = self.queues.dead_letters().await;
        self.ledger.on_dlq = dead_letters.len() as u64;
        let report = history::check(&self.pool, &self.ledger).await.unwrap();
        let secs = self.started.elapsed().as_secs_f64();
        let line = format!(
            "{:<36} workflows {:>3}  steps {:>4}  attempts {:>4}  faults {:>3}  duplicate outcomes {}  lost steps {}  messages unaccounted {}  (sent {} ({} steps) + injected {}, acknowledged {}, removed by test {}, left on queue {}, DLQ {}, balance {}{})  {:.1}s{}",
            self.scenario,
            self.workflows,
            report.steps,
            report.attempts,
            self.faults,
            report.duplicate_outcomes,
            report.lost_steps,
            report.messages_unaccounted,
            report.counters.messages,
            report.counters.sent,
            report.injected,
            report.acknowledged,
            report.removed_by_test,
            report.left_on_queue,
            report.on_dlq,
            report.message_balance,
            match (self.ledger.killed_executors > 0, self.ledger.lost_schedulers > 0) {
                (true, _) => " = acknowledged by killed executors",
                (false, true) => " = sent by the scheduler that died",
                (false, false) => "",
            },
            secs,
            if self.notes.is_empty() { String::new() } else { format!("  notes: {}", self.notes.join("; ")) },
        );
        println!("{line}");
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(target_dir().join("fault-summary.txt"))
            .expect("summary file");
        writeln!(file, "{line}").expect("write summary");

        assert!(
            self.scheduler_restarts == 0,
            "[{}] the scheduler died {} times",
            self.scenario,
            self.scheduler_restarts
        );
        assert!(unclean.is_empty(), "[{}] executors exited without counters: {unclean:?}", self.scenario);
        let violations = report.check();
        assert!(violations.is_empty(), "[{}] the history breaks the rules:\n{}", self.scenario, {
            violations.iter().map(|v| format!("  {v}")).collect::<Vec<_>>().join("\n")
        });
        assert_eq!(report.lost_steps, 0);
        assert_eq!(report.duplicate_outcomes, 0);
        assert_eq!(report.messages_unaccounted, 0);
        Finished { expected_attempts: self.expected_attempts, report, pool: self.pool, _db: self.db, dead_letters }
    }
}

/// What a finished scenario hands back for its own assertions.
pub struct Finished {
    pub expected_attempts: u64,
    pub report: Report,
    pub pool: PgPool,
    pub dead_letters: Vec<(String, Option<String>)>,
    pub _db: ScratchDb,
}

impl Finished {
    /// Without kills, pauses or database faults every step ran once per planned attempt.
    pub fn assert_nothing_ran_twice(&self) {
        assert_eq!(self.report.attempts, self.expected_attempts, "attempts made vs a fault-free run");
    }

    pub async fn outcomes_of(&self, worker: &str) -> Vec<(Uuid, i32, String)> {
        sqlx::query_as("SELECT step_id, attempt, outcome::text FROM step_attempts WHERE leased_by = $1")
            .bind(worker)
            .fetch_all(&self.pool)
            .await
            .unwrap()
    }

    pub async fn attempts_of(&self, step_id: Uuid) -> Vec<(i32, String, String)> {
        sqlx::query_as(
            "SELECT attempt, leased_by, outcome::text FROM step_attempts WHERE step_id = $1 ORDER BY attempt",
        )
        .bind(step_id)
        .fetch_all(&self.pool)
        .await
        .unwrap()
    }
}
