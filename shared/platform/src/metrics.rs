//! The invocation's figures as CloudWatch embedded-metric-format log lines (CloudWatch turns
//! them into metrics; locally each is just a JSON line on stdout): the [`Counters`] in one
//! line, dimension `Function`, and the executor's [`OperationMetrics`] one line per operation,
//! dimensions `Function` and `Operation` (bounded: never a step or run id).

use rara_runtime::metrics::{Counters, OperationMetrics};

/// The most values one EMF metric may carry in one line (CloudWatch's limit).
pub const EMF_MAX_VALUES: usize = 100;

/// Counters as one embedded-metric line.
pub trait EmfLine {
    /// The embedded-metric JSON line for `function`.
    fn emf_line(&self, function: &str) -> String;
}

/// The figures per operation as embedded-metric lines.
pub trait EmfLines {
    /// The embedded-metric lines of `function`: one per operation (more when an operation has
    /// more than [`EMF_MAX_VALUES`] values), none when nothing ran.
    fn emf_lines(&self, function: &str) -> Vec<String>;
}

impl EmfLine for Counters {
    fn emf_line(&self, function: &str) -> String {
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
            ("QuickLocks", self.quick_locks),
            ("Messages", self.messages),
            ("Packed", self.packed),
            ("Unsettled", self.unsettled),
            ("Moved", self.moved),
            ("WaitsStarted", self.waits_started),
            ("WaitsDecided", self.waits_decided),
            ("WaitsApplied", self.waits_applied),
            ("SlotsFired", self.slots_fired),
            ("SlotsSkipped", self.slots_skipped),
            ("SlotsMissed", self.slots_missed),
            ("SlotsFailed", self.slots_failed),
            ("WaitsTimedOut", self.waits_timed_out),
            ("WaitsEnded", self.waits_ended),
            ("RunsTimedOut", self.runs_timed_out),
            ("ChildrenStarted", self.children_started),
            ("ChildrenCancelled", self.children_cancelled),
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

impl EmfLines for OperationMetrics {
    fn emf_lines(&self, function: &str) -> Vec<String> {
        let mut lines = Vec::new();
        let timestamp = chrono::Utc::now().timestamp_millis();
        for (operation, figures) in self.operations() {
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
    use std::time::Duration;

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
