//! Counters of one invocation, printed as one CloudWatch embedded-metric-format log line
//! (CloudWatch turns it into metrics; locally it is just a JSON line on stdout), and the
//! executor's figures per operation ([`OperationMetrics`]: outcomes, attempt duration, queue
//! age), one line per operation, dimensions `Function` and `Operation` (bounded: never a step
//! or run id).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The most values one EMF metric may carry in one line (CloudWatch's limit).
pub const EMF_MAX_VALUES: usize = 100;

/// What one scheduler or executor invocation did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    pub received: u64,
    pub leased: u64,
    pub sent: u64,
    pub released: u64,
    pub reaped: u64,
    pub claimed: u64,
    pub stale: u64,
    pub held: u64,
    pub succeeded: u64,
    /// Executor: retries scheduled (both routes).
    pub retried: u64,
    /// Executor: retries beyond the visibility limit, recorded in Postgres; their messages
    /// were acknowledged (the scheduler sends a new one when the retry is due).
    pub deferred: u64,
    pub failed: u64,
    pub lease_lost: u64,
    pub dead_lettered: u64,
    /// Executor: executions that ended in a panic or a `JoinError` (recorded as a retryable
    /// `EXECUTOR_PANICKED` failure; their messages never acknowledged without an outcome).
    pub panicked: u64,
    pub returned: u64,
    /// Scheduler: lease statements run (including the one that found nothing due).
    pub lease_rounds: u64,
    /// Scheduler: reaper passes run (every `RARA_REAP_INTERVAL_MS`).
    pub reaper_runs: u64,
    /// Scheduler: waits ended early by a `NOTIFY` that steps became due.
    pub wakeups: u64,
    /// Scheduler: checks whether a hot table outgrew its planner statistics (one statement
    /// each, every `STATISTICS_INTERVAL`).
    pub statistics_checks: u64,
    /// Scheduler: tables analyzed because they outgrew their planner statistics.
    pub statistics_refreshes: u64,
    /// Executor: remote attempts parked at the invocation's end (they go on detached; their
    /// messages come back after the re-attach interval).
    pub parked: u64,
    /// Executor: claims that re-attached to a detached attempt (same attempt, same fence).
    pub reattached: u64,
    /// Scheduler: finished runs deleted by the retention (`RARA_RETENTION_DAYS`).
    pub pruned: u64,
    /// Executor: map steps expanded into their children (`for_each`).
    pub expanded: u64,
    /// Executor: quick steps run and recorded in the transaction of their lock (DESIGN.md
    /// "Quick steps"; also counted as claimed and succeeded).
    pub quick: u64,
    /// Messages sent: the scheduler's (`sent` counts their steps; they differ when
    /// `RARA_STEPS_PER_MESSAGE` is above 1), and an executor's (`moved`).
    pub messages: u64,
    /// Executor: steps received beyond one per message (`received` counts messages): every
    /// received step gets one fate.
    pub packed: u64,
    /// Executor: steps of a message of several that had to come back (a retry, a hold, a
    /// park), moved into a message of their own, sent with that delay (their unit
    /// acknowledged; also counted in `messages`).
    pub moved: u64,
    /// Executor: received steps not acknowledged (each message of `returned` has at least
    /// one; equal to `returned` when every message names one step).
    pub unsettled: u64,
}

impl std::ops::AddAssign for Counters {
    fn add_assign(&mut self, c: Counters) {
        self.received += c.received;
        self.messages += c.messages;
        self.packed += c.packed;
        self.unsettled += c.unsettled;
        self.moved += c.moved;
        self.leased += c.leased;
        self.sent += c.sent;
        self.released += c.released;
        self.reaped += c.reaped;
        self.claimed += c.claimed;
        self.stale += c.stale;
        self.held += c.held;
        self.succeeded += c.succeeded;
        self.retried += c.retried;
        self.deferred += c.deferred;
        self.failed += c.failed;
        self.lease_lost += c.lease_lost;
        self.dead_lettered += c.dead_lettered;
        self.panicked += c.panicked;
        self.returned += c.returned;
        self.lease_rounds += c.lease_rounds;
        self.reaper_runs += c.reaper_runs;
        self.wakeups += c.wakeups;
        self.statistics_checks += c.statistics_checks;
        self.statistics_refreshes += c.statistics_refreshes;
        self.parked += c.parked;
        self.reattached += c.reattached;
        self.pruned += c.pruned;
        self.expanded += c.expanded;
        self.quick += c.quick;
    }
}

impl Counters {
    /// The embedded-metric JSON line for `function`.
    pub fn emf_line(&self, function: &str) -> String {
        let names = [
            ("Received", self.received),
            ("Leased", self.leased),
            ("Sent", self.sent),
            ("Released", self.released),
            ("Reaped", self.reaped),
            ("Claimed", self.claimed),
            ("Stale", self.stale),
            ("Held", self.held),
            ("Succeeded", self.succeeded),
            ("Retried", self.retried),
            ("Deferred", self.deferred),
            ("Failed", self.failed),
            ("LeaseLost", self.lease_lost),
            ("DeadLettered", self.dead_lettered),
            ("Panicked", self.panicked),
            ("Returned", self.returned),
            ("LeaseRounds", self.lease_rounds),
            ("ReaperRuns", self.reaper_runs),
            ("Wakeups", self.wakeups),
            ("StatisticsChecks", self.statistics_checks),
            ("StatisticsRefreshes", self.statistics_refreshes),
            ("Parked", self.parked),
            ("Reattached", self.reattached),
            ("Pruned", self.pruned),
            ("Expanded", self.expanded),
            ("Quick", self.quick),
            ("Messages", self.messages),
            ("Packed", self.packed),
            ("Unsettled", self.unsettled),
            ("Moved", self.moved),
        ];
        let mut doc = serde_json::json!({
            "_aws": {
                "Timestamp": chrono::Utc::now().timestamp_millis(),
                "CloudWatchMetrics": [{
                    "Namespace": "rara",
                    "Dimensions": [["Function"]],
                    "Metrics": names.iter().map(|(n, _)| serde_json::json!({"Name": n, "Unit": "Count"})).collect::<Vec<_>>(),
                }],
            },
            "Function": function,
        });
        for (name, value) in names {
            doc[name] = value.into();
        }
        doc.to_string()
    }
}

/// The executor's figures of one invocation, per operation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OperationMetrics {
    operations: BTreeMap<String, OperationFigures>,
}

#[derive(Debug, Clone, Default, PartialEq)]
struct OperationFigures {
    /// Attempts by outcome metric name (`Succeeded`, `Failed`, `Retried`, `LeaseLost`, …).
    outcomes: BTreeMap<&'static str, u64>,
    /// Attempt durations (ms): from the attempt's start to its outcome.
    attempt_ms: Vec<f64>,
    /// Queue ages (ms): from a message's first send to its claim.
    queue_age_ms: Vec<f64>,
}

impl OperationMetrics {
    /// An attempt of `operation` ended with `outcome` (a metric name) after `duration`.
    pub fn attempt(&mut self, operation: &str, outcome: &'static str, duration: Duration) {
        let figures = self.operations.entry(operation.to_owned()).or_default();
        *figures.outcomes.entry(outcome).or_default() += 1;
        figures.attempt_ms.push(duration.as_secs_f64() * 1000.0);
    }

    /// A message of `operation` was claimed `age` after it was first sent.
    pub fn queue_age(&mut self, operation: &str, age: Duration) {
        self.operations.entry(operation.to_owned()).or_default().queue_age_ms.push(age.as_secs_f64() * 1000.0);
    }

    /// The embedded-metric lines of `function`: one per operation (more when an operation has
    /// more than [`EMF_MAX_VALUES`] values), none when nothing ran.
    pub fn emf_lines(&self, function: &str) -> Vec<String> {
        let mut lines = Vec::new();
        let timestamp = chrono::Utc::now().timestamp_millis();
        for (operation, figures) in &self.operations {
            let chunks = figures.attempt_ms.len().max(figures.queue_age_ms.len()).div_ceil(EMF_MAX_VALUES).max(1);
            for chunk in 0..chunks {
                let mut doc = serde_json::json!({"Function": function, "Operation": operation});
                let mut metrics = Vec::new();
                let window = |values: &[f64]| -> Vec<f64> {
                    values.iter().skip(chunk * EMF_MAX_VALUES).take(EMF_MAX_VALUES).copied().collect()
                };
                for (name, values) in
                    [("AttemptDuration", window(&figures.attempt_ms)), ("QueueAge", window(&figures.queue_age_ms))]
                {
                    if !values.is_empty() {
                        metrics.push(serde_json::json!({"Name": name, "Unit": "Milliseconds"}));
                        doc[name] = values.into();
                    }
                }
                if chunk == 0 {
                    for (name, count) in &figures.outcomes {
                        metrics.push(serde_json::json!({"Name": name, "Unit": "Count"}));
                        doc[*name] = (*count).into();
                    }
                }
                doc["_aws"] = serde_json::json!({
                    "Timestamp": timestamp,
                    "CloudWatchMetrics": [{
                        "Namespace": "rara",
                        "Dimensions": [["Function", "Operation"]],
                        "Metrics": metrics,
                    }],
                });
                lines.push(doc.to_string());
            }
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// `Received` for `received`: the EMF name of a field.
    fn metric_name(field: &str) -> String {
        field
            .split('_')
            .map(|w| {
                let mut c = w.chars();
                c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
            })
            .collect()
    }

    /// Every field of `Counters` (from its serialized form, so a new field is seen here
    /// without touching this test), each set to a distinct value.
    fn distinct() -> (Vec<String>, Counters) {
        let fields: Vec<String> =
            serde_json::to_value(Counters::default()).unwrap().as_object().unwrap().keys().cloned().collect();
        let values: serde_json::Map<String, serde_json::Value> =
            fields.iter().enumerate().map(|(i, f)| (f.clone(), (i as u64 + 1).into())).collect();
        (fields, serde_json::from_value(values.into()).unwrap())
    }

    #[test]
    fn emf_line_declares_and_carries_every_counter() {
        let (fields, counters) = distinct();
        let doc: serde_json::Value = serde_json::from_str(&counters.emf_line("executor")).unwrap();
        assert_eq!(doc["Function"], "executor");
        let declared: Vec<&str> = doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["Name"].as_str().unwrap())
            .collect();
        assert_eq!(declared.len(), fields.len(), "one declared metric per counter: {declared:?}");
        for (i, field) in fields.iter().enumerate() {
            let name = metric_name(field);
            assert!(declared.contains(&name.as_str()), "{field} is not declared as the metric {name}");
            assert_eq!(doc[&name], i as u64 + 1, "the metric {name} does not carry the counter {field}");
        }
    }

    #[test]
    fn adding_counters_sums_every_field() {
        let (fields, counters) = distinct();
        let mut sum = counters;
        sum += counters;
        let sum = serde_json::to_value(sum).unwrap();
        for (i, field) in fields.iter().enumerate() {
            assert_eq!(sum[field], 2 * (i as u64 + 1), "{field} is not summed");
        }
    }

    #[test]
    fn operation_lines_carry_outcomes_durations_and_queue_ages_per_operation() {
        let mut metrics = OperationMetrics::default();
        assert!(metrics.emf_lines("executor").is_empty(), "nothing ran, nothing printed");
        metrics.attempt("noop", "Succeeded", Duration::from_millis(3));
        metrics.attempt("noop", "Retried", Duration::from_millis(5));
        metrics.queue_age("noop", Duration::from_millis(40));
        for _ in 0..150 {
            metrics.attempt("text.stats", "Succeeded", Duration::from_millis(7));
        }
        let lines: Vec<serde_json::Value> =
            metrics.emf_lines("executor").iter().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 3, "noop in one line, text.stats in two (150 values > 100)");
        let noop = &lines[0];
        assert_eq!((noop["Function"].as_str(), noop["Operation"].as_str()), (Some("executor"), Some("noop")));
        assert_eq!(noop["AttemptDuration"], serde_json::json!([3.0, 5.0]));
        assert_eq!(noop["QueueAge"], serde_json::json!([40.0]));
        assert_eq!((noop["Succeeded"].as_u64(), noop["Retried"].as_u64()), (Some(1), Some(1)));
        let declared = &noop["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(declared["Dimensions"], serde_json::json!([["Function", "Operation"]]));
        assert_eq!(declared["Metrics"].as_array().unwrap().len(), 4);
        let values = |line: &serde_json::Value| line["AttemptDuration"].as_array().unwrap().len();
        assert_eq!((values(&lines[1]), values(&lines[2])), (100, 50));
        assert_eq!((lines[1]["Succeeded"].as_u64(), lines[2]["Succeeded"].as_u64()), (Some(150), None), "counted once");
    }
}
