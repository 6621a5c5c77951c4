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
    pub retried: u64,
    pub failed: u64,
    pub lease_lost: u64,
    pub dead_lettered: u64,
    pub returned: u64,
    /// Scheduler: lease statements run (including the one that found nothing due).
    pub lease_rounds: u64,
    /// Scheduler: reaper passes run (every `RARA_REAP_INTERVAL_MS`).
    pub reaper_runs: u64,
    /// Scheduler: waits ended early by a `NOTIFY` that steps became due.
    pub wakeups: u64,
    /// Scheduler: tables analyzed because they outgrew their planner statistics.
    pub statistics_refreshes: u64,
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
        self.failed += c.failed;
        self.lease_lost += c.lease_lost;
        self.dead_lettered += c.dead_lettered;
        self.returned += c.returned;
        self.lease_rounds += c.lease_rounds;
        self.reaper_runs += c.reaper_runs;
        self.wakeups += c.wakeups;
        self.statistics_refreshes += c.statistics_refreshes;
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
            ("Failed", self.failed),
            ("LeaseLost", self.lease_lost),
            ("DeadLettered", self.dead_lettered),
            ("Returned", self.returned),
            ("LeaseRounds", self.lease_rounds),
            ("ReaperRuns", self.reaper_runs),
            ("Wakeups", self.wakeups),
            ("StatisticsRefreshes", self.statistics_refreshes),
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
    use super::*;

    #[test]
    fn emf_line_declares_and_carries_every_metric() {
        let c = Counters { claimed: 3, dead_lettered: 1, ..Default::default() };
        let doc: serde_json::Value = serde_json::from_str(&c.emf_line("executor")).unwrap();
        assert_eq!(doc["Claimed"], 3);
        assert_eq!(doc["DeadLettered"], 1);
        assert_eq!(doc["Function"], "executor");
        let declared = doc["_aws"]["CloudWatchMetrics"][0]["Metrics"].as_array().unwrap();
        assert_eq!(declared.len(), 18);
    }
}
