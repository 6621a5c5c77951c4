//! Plain-text tables for people. Scripts use `--json`.

use std::collections::HashMap;
use std::fmt::Write;
use uuid::Uuid;

use rara_domain::state::StepStatus;
use rara_store::flow::{KeyState, Pause};
use rara_store::read::{RunSummary, RunView, StepView};

/// Under a map step, at most this many of its children are listed (those that did not
/// succeed first); a line counts the rest.
const CHILDREN_SHOWN: usize = 10;

/// Left-aligned columns, two spaces apart.
pub(crate) fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        let _ = writeln!(out, "{}", padded.join("  ").trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}

pub fn run(run: &RunView) -> String {
    let name = match run.workflow_version {
        Some(version) => format!("{}@{version}", run.name),
        None => run.name.clone(),
    };
    let mut out = format!("run {}  {name}  {}\n", run.id, run.status);
    if let Some(key) = &run.idempotency_key {
        let _ = writeln!(out, "idempotency key {key}");
    }
    if let Some(of) = run.rerun_of {
        let _ = writeln!(out, "rerun of {of}");
    }
    if !run.reruns.is_empty() {
        let reruns: Vec<String> = run.reruns.iter().map(Uuid::to_string).collect();
        let _ = writeln!(out, "reruns {}", reruns.join(", "));
    }
    if let Some(parent) = &run.parent {
        let _ = writeln!(out, "child of run {} step {} (attempt {})", parent.run_id, parent.step, parent.attempt);
    }
    for child in &run.children {
        let _ = writeln!(out, "child run {} of step {} (attempt {})", child.run_id, child.step, child.attempt);
    }
    if let Some(d) = rara_domain::stored::Descriptor::of(&run.inputs) {
        let _ = writeln!(out, "inputs by reference: {} bytes, {} at {}", d.size_bytes, d.digest, d.uri);
    } else if run.inputs.as_object().is_some_and(|i| !i.is_empty()) {
        let _ = writeln!(out, "inputs {}", run.inputs);
    }
    if let Some(output) = &run.output {
        let _ = writeln!(out, "output {output}");
    }
    if let Some(error) = &run.output_error {
        let _ = writeln!(out, "output not resolved: {error}");
    }
    out.push('\n');
    let row = |s: &StepView, name: String| {
        let progress = format!("{:.0}%", s.progress_fraction() * 100.0);
        let error = s.error.as_ref().map(|e| format!("{}: {}", e.code, e.message)).unwrap_or_default();
        vec![
            name,
            s.operation.clone(),
            s.status_text(),
            format!("{}/{}", s.attempt, s.max_attempts),
            progress,
            s.artifacts.len().to_string(),
            s.depends_on.join(","),
            error,
        ]
    };
    let children = children_by_map(run);
    let mut rows: Vec<Vec<String>> = Vec::with_capacity(run.steps.len());
    for step in run.steps.iter().filter(|s| s.parent.is_none()) {
        rows.push(row(step, step.name.clone()));
        let Some(kids) = children.get(step.name.as_str()) else { continue };
        let shown: Vec<&StepView> = if kids.len() <= CHILDREN_SHOWN {
            kids.clone()
        } else {
            kids.iter().copied().filter(|c| c.status != StepStatus::Succeeded).take(CHILDREN_SHOWN).collect()
        };
        for child in &shown {
            rows.push(row(child, format!("  {}", child.name)));
        }
        let mut summary = vec![format!("  {} children", kids.len()), String::new(), children_summary(kids)];
        if shown.len() < kids.len() {
            summary[0].push_str(&format!(" ({} not listed)", kids.len() - shown.len()));
        }
        rows.push(summary);
    }
    out.push_str(&render(
        &["STEP", "OPERATION", "STATUS", "ATTEMPT", "PROGRESS", "ARTIFACTS", "DEPENDS ON", "ERROR"],
        &rows,
    ));
    out
}

/// The children of each map step, by its name, in element order.
pub fn children_by_map(run: &RunView) -> HashMap<&str, Vec<&StepView>> {
    let mut children: HashMap<&str, Vec<&StepView>> = HashMap::new();
    for step in &run.steps {
        if let Some(parent) = &step.parent {
            children.entry(parent.as_str()).or_default().push(step);
        }
    }
    children
}

/// How many of a map step's children are in each status: `990 succeeded, 8 running, 2 failed`.
pub fn children_summary(children: &[&StepView]) -> String {
    StepStatus::ALL
        .iter()
        .filter_map(|status| match children.iter().filter(|c| c.status == *status).count() {
            0 => None,
            n => Some(format!("{n} {status}")),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn runs(runs: &[RunSummary]) -> String {
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            vec![
                r.id.to_string(),
                r.name.clone(),
                r.status.to_string(),
                format!("{}/{}", r.steps_finished, r.steps_total),
                r.created_at.format("%Y-%m-%d %H:%M:%S").to_string(),
            ]
        })
        .collect();
    render(&["RUN", "NAME", "STATUS", "STEPS DONE", "CREATED (UTC)"], &rows)
}

/// `rara workflow list`.
pub fn registrations(registrations: &[rara_store::definitions::Registration]) -> String {
    let rows: Vec<Vec<String>> = registrations
        .iter()
        .map(|r| {
            vec![
                r.name.clone(),
                r.version.to_string(),
                r.versions.to_string(),
                r.created_at.format("%Y-%m-%d %H:%M:%S").to_string(),
            ]
        })
        .collect();
    render(&["WORKFLOW", "NEWEST", "VERSIONS", "REGISTERED (UTC)"], &rows)
}

/// `rara schedule list`.
pub fn schedules(schedules: &[rara_store::schedules::ScheduleView]) -> String {
    let time = |t: chrono::DateTime<chrono::Utc>| t.format("%Y-%m-%d %H:%M:%S").to_string();
    let rows: Vec<Vec<String>> = schedules
        .iter()
        .map(|s| {
            let spec = match (&s.spec.cron, s.spec.every_ms) {
                (Some(cron), _) => cron.clone(),
                (None, Some(ms)) => {
                    format!("every {}", rara_domain::human::duration(std::time::Duration::from_millis(ms as u64)))
                }
                (None, None) => "-".into(),
            };
            let last = match (s.last_run_id, s.last_run_status) {
                (Some(run), Some(status)) => format!("{run} {status}"),
                (Some(run), None) => format!("{run} (pruned)"),
                (None, _) => "-".into(),
            };
            let paused = if s.paused { "yes" } else { "" };
            vec![
                s.name.clone(),
                s.workflow_ref(),
                spec,
                s.spec.timezone.clone(),
                time(s.next_fire_at),
                last,
                paused.into(),
            ]
        })
        .collect();
    render(&["SCHEDULE", "WORKFLOW", "SPEC", "TIMEZONE", "NEXT FIRE (UTC)", "LAST RUN", "PAUSED"], &rows)
}

pub fn dead_letters(rows: &[serde_json::Value]) -> String {
    let text = |v: &serde_json::Value| v.as_str().map(str::to_owned).unwrap_or_else(|| "-".into());
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut body = text(&r["body"]);
            if body.chars().count() > 60 {
                body = body.chars().take(57).collect::<String>() + "...";
            }
            vec![
                text(&r["message_id"]),
                text(&r["state"]),
                r["receive_count"].to_string(),
                text(&r["classification"]),
                body,
            ]
        })
        .collect();
    render(&["MESSAGE", "STATE", "RECEIVES", "CLASSIFICATION", "BODY"], &rows)
}

pub fn capabilities(capabilities: &[rara_remote::RemoteCapability]) -> String {
    let rows: Vec<Vec<String>> = capabilities
        .iter()
        .map(|c| {
            let long = if c.detachable { "yes" } else { "no" };
            let health = if c.serving { "serving" } else { "not serving" };
            vec![
                c.name.clone(),
                c.version.clone(),
                long.to_owned(),
                c.description.clone(),
                c.endpoint.clone(),
                health.to_owned(),
            ]
        })
        .collect();
    // LONG STEPS: whether an attempt may outlive one invocation (the capability is detachable);
    // HEALTH: the endpoint's grpc.health.v1 answer (a draining executor gets no new attempts).
    render(&["NAME", "VERSION", "LONG STEPS", "DESCRIPTION", "ENDPOINT", "HEALTH"], &rows)
}

/// `rara limits list` for people: the keys, then the pauses.
pub fn limits(keys: &[KeyState], pauses: &[Pause]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{:<32}  {:>6}  {:>10}  {:>6}  {:>8}  paused", "key", "limit", "rate", "held", "queued");
    for k in keys {
        let limit = k.limit.map_or("-".into(), |n| n.to_string());
        let rate = k.rate.clone().unwrap_or_else(|| "-".into());
        let paused = if k.paused { "yes" } else { "" };
        let _ = writeln!(out, "{:<32}  {limit:>6}  {rate:>10}  {:>6}  {:>8}  {paused}", k.name, k.held, k.queued);
    }
    if !pauses.is_empty() {
        let _ = writeln!(out, "\npaused");
        for p in pauses {
            let _ = writeln!(out, "  {} {} since {}", p.kind, p.target, p.paused_at.format("%Y-%m-%d %H:%M:%S"));
        }
    }
    out
}
