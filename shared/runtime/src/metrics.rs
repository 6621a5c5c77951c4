//! Counters of one invocation, printed as one CloudWatch embedded-metric-format log line
//! (CloudWatch turns it into metrics; locally it is just a JSON line on stdout).

use serde::{Deserialize, Serialize};

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
}

impl std::ops::AddAssign for Counters {
    fn add_assign(&mut self, c: Counters) {
        self.received += c.received;
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
        self.statistics_refreshes += c.statistics_refreshes;
        self.parked += c.parked;
        self.reattached += c.reattached;
        self.pruned += c.pruned;
        self.expanded += c.expanded;
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
            ("StatisticsRefreshes", self.statistics_refreshes),
            ("Parked", self.parked),
            ("Reattached", self.reattached),
            ("Pruned", self.pruned),
            ("Expanded", self.expanded),
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
}
