//! `rara watch RUN_ID`: live progress per step until the run ends. On a terminal: a bar
//! per step; otherwise (or with `--json`): one line per change. A map step's children are
//! counted on its line (`--json`: a line each, with `parent` and `map_index`).

use std::collections::HashMap;
use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use rara_domain::state::{RunStatus, StepStatus};
use rara_store::Store;
use rara_store::read::{RunView, StepView};
use uuid::Uuid;

use crate::exit::ExitCode;
use crate::{Failure, table};

fn describe(step: &StepView) -> String {
    let mut text = format!("{} (attempt {}/{})", step.status_text(), step.attempt, step.max_attempts);
    if let Some(message) = step.progress.as_ref().map(|p| p.message.as_str()).filter(|m| !m.is_empty())
        && !step.status.is_terminal()
    {
        text.push_str(&format!(" {message}"));
    }
    if let Some(error) = &step.error {
        text.push_str(&format!(" {}", error.code));
    }
    text
}

/// Polls the run every `interval` and shows it until it ends.
pub async fn watch(store: &Store, run_id: Uuid, json: bool, interval: Duration) -> Result<RunView, Failure> {
    let tty = !json && std::io::stderr().is_terminal();
    let multi =
        MultiProgress::with_draw_target(if tty { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() });
    let style = ProgressStyle::with_template("{prefix:<14} [{bar:30.cyan/blue}] {pos:>3}% {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    let mut bars: HashMap<Uuid, ProgressBar> = HashMap::new();
    let mut seen: HashMap<Uuid, String> = HashMap::new();
    let started = std::time::Instant::now();
    loop {
        let run = store.run(run_id).await?;
        let children = table::children_by_map(&run);
        for step in &run.steps {
            // People see a map step's children grouped on its own line; scripts get each one.
            if step.parent.is_some() && !json {
                continue;
            }
            let mut text = describe(step);
            let mut pct = (step.progress_fraction() * 100.0).round() as u64;
            if let Some(kids) = children.get(step.name.as_str()) {
                let done = kids.iter().filter(|c| c.status == StepStatus::Succeeded).count();
                if !step.status.is_terminal() {
                    pct = (done * 100 / kids.len()) as u64;
                }
                text.push_str(&format!(", {} children: {}", kids.len(), table::children_summary(kids)));
            }
            if tty {
                let bar = bars.entry(step.id).or_insert_with(|| {
                    let bar = multi.add(ProgressBar::new(100).with_style(style.clone()));
                    bar.set_prefix(step.name.clone());
                    bar
                });
                bar.set_position(pct);
                bar.set_message(text);
            } else {
                let line = format!("{text} {pct}%");
                if seen.get(&step.id) != Some(&line) {
                    if json {
                        println!(
                            "{}",
                            serde_json::json!({"step": step.name, "status": step.status, "detached": step.is_detached(), "attempt": step.attempt,
                                               "progress": step.progress_fraction(), "error": step.error,
                                               "parent": step.parent, "map_index": step.map_index})
                        );
                    } else {
                        let at = rara_domain::human::duration(started.elapsed()).to_string();
                        println!("{at:>10}  {:<14} {line}", step.name);
                    }
                    seen.insert(step.id, line);
                }
            }
        }
        if run.status.is_terminal() {
            for bar in bars.values() {
                bar.finish();
            }
            return Ok(run);
        }
        tokio::time::sleep(interval).await;
    }
}

/// The exit code for a finished run.
pub fn exit_code(status: RunStatus) -> ExitCode {
    if status == RunStatus::Succeeded { ExitCode::Success } else { ExitCode::RunDidNotSucceed }
}
