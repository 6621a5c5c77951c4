//! Plain-text tables for people. Scripts use `--json`.

use std::fmt::Write;

use rara_store::read::{RunSummary, RunView};

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
    let mut out = format!("run {}  {}  {}\n", run.id, run.name, run.status);
    if let Some(key) = &run.idempotency_key {
        let _ = writeln!(out, "idempotency key {key}");
    }
    if let Some(outputs) = &run.outputs {
        let _ = writeln!(out, "outputs {outputs}");
    }
    if let Some(error) = &run.outputs_error {
        let _ = writeln!(out, "outputs not resolved: {error}");
    }
    out.push('\n');
    let rows: Vec<Vec<String>> = run
        .steps
        .iter()
        .map(|s| {
            let progress = format!("{:.0}%", s.progress_fraction() * 100.0);
            let error = s.error.as_ref().map(|e| format!("{}: {}", e.code, e.message)).unwrap_or_default();
            vec![
                s.name.clone(),
                s.operation.clone(),
                s.status_text(),
                format!("{}/{}", s.attempt, s.max_attempts),
                progress,
                s.artifacts.len().to_string(),
                s.depends_on.join(","),
                error,
            ]
        })
        .collect();
    out.push_str(&render(
        &["STEP", "OPERATION", "STATUS", "ATTEMPT", "PROGRESS", "ARTIFACTS", "DEPENDS ON", "ERROR"],
        &rows,
    ));
    out
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
