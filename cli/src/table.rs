//! Plain-text tables for people. Scripts use `--json`.

use std::fmt::Write;

use rara_store::read::RunView;

/// Left-aligned columns, two spaces apart.
fn render(header: &[&str], rows: &[Vec<String>]) -> String {
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
    out.push('\n');
    let rows: Vec<Vec<String>> = run
        .steps
        .iter()
        .map(|s| {
            let progress = s
                .progress
                .as_ref()
                .and_then(|p| p.get("fraction")?.as_f64())
                .map(|f| format!("{:.0}%", f * 100.0))
                .unwrap_or_else(|| "-".into());
            let error = s
                .error
                .as_ref()
                .map(|e| format!("{}: {}", e["code"].as_str().unwrap_or("?"), e["message"].as_str().unwrap_or("")))
                .unwrap_or_default();
            vec![
                s.name.clone(),
                s.operation.clone(),
                s.status.to_string(),
                format!("{}/{}", s.attempt, s.max_attempts),
                progress,
                s.depends_on.join(","),
                error,
            ]
        })
        .collect();
    out.push_str(&render(&["STEP", "OPERATION", "STATUS", "ATTEMPT", "PROGRESS", "DEPENDS ON", "ERROR"], &rows));
    out
}
