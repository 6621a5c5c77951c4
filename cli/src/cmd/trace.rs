//! `rara trace`: a run's trace id and the timeline of its attempt spans, read from Postgres,
//! for users without a tracing backend (DESIGN.md "Tracing"). Each attempt's span id is the
//! one its spans carry in a backend ([`rara_runtime::telemetry::attempt_span_id`]).

use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, Utc};
use clap::Args;
use rara_runtime::telemetry;
use uuid::Uuid;

use crate::{Failure, table};

/// Width of the timeline bars, in characters.
const BAR_WIDTH: usize = 40;

/// Show a run's trace id and its attempts as a timeline.
#[derive(Debug, Args)]
pub struct Trace {
    /// The run id printed by `rara submit`.
    run_id: Uuid,
}

/// One attempt span of the timeline.
#[derive(Debug, serde::Serialize)]
struct Span {
    step: String,
    step_id: Uuid,
    attempt: i32,
    span_id: String,
    outcome: rara_domain::state::AttemptOutcome,
    started_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
}

pub async fn run(args: Trace, json: bool) -> Result<(), Failure> {
    let store = super::connect(&super::config()?).await?;
    let context = store.run_trace(args.run_id).await?;
    let run = store.run(args.run_id).await?;
    let root = context.as_deref().and_then(telemetry::parse_traceparent);
    let mut spans: Vec<Span> = run
        .steps
        .iter()
        .flat_map(|step| {
            step.attempts.iter().map(|a| Span {
                step: step.name.clone(),
                step_id: step.id,
                attempt: a.attempt,
                span_id: telemetry::attempt_span_id(step.id, a.attempt).to_string(),
                outcome: a.outcome,
                started_at: a.started_at,
                finished_at: a.finished_at,
            })
        })
        .collect();
    spans.sort_by_key(|s| (s.started_at, s.attempt));
    let trace_id = root.as_ref().map(|r| r.trace_id().to_string());
    if json {
        let doc = serde_json::json!({
            "run_id": run.id,
            "trace_id": trace_id,
            "root_span_id": root.as_ref().map(|r| r.span_id().to_string()),
            "spans": spans,
        });
        println!("{}", serde_json::to_string_pretty(&doc).context("cannot encode the trace")?);
        return Ok(());
    }
    match &root {
        Some(root) => {
            println!("trace {}  root span {}  run {}  {}", root.trace_id(), root.span_id(), run.id, run.status)
        }
        None => println!("run {} has no trace (submitted before tracing)  {}", run.id, run.status),
    }
    print!("{}", timeline(run.created_at, run.finished_at.unwrap_or_else(Utc::now), &spans));
    Ok(())
}

/// The attempts as rows: offset from the run's start, duration, and a bar on a common scale.
fn timeline(start: DateTime<Utc>, end: DateTime<Utc>, spans: &[Span]) -> String {
    let now = Utc::now();
    let total = (end - start).to_std().unwrap_or_default().max(Duration::from_millis(1));
    let column = |at: DateTime<Utc>| {
        let offset = (at - start).to_std().unwrap_or_default();
        ((offset.as_secs_f64() / total.as_secs_f64()) * BAR_WIDTH as f64).round() as usize
    };
    let rows: Vec<Vec<String>> = spans
        .iter()
        .map(|s| {
            let finished = s.finished_at.unwrap_or(now);
            let (from, to) = (column(s.started_at).min(BAR_WIDTH), column(finished).min(BAR_WIDTH));
            let bar = format!("{}{}", " ".repeat(from), "█".repeat(to.saturating_sub(from).max(1)));
            vec![
                s.step.clone(),
                s.attempt.to_string(),
                s.span_id.clone(),
                format!("+{:.3}s", (s.started_at - start).to_std().unwrap_or_default().as_secs_f64()),
                format!("{:.3}s", (finished - s.started_at).to_std().unwrap_or_default().as_secs_f64()),
                serde_json::to_value(s.outcome).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default(),
                bar,
            ]
        })
        .collect();
    table::render(&["STEP", "ATTEMPT", "SPAN", "START", "DURATION", "OUTCOME", "TIMELINE"], &rows)
}
