//! The attempts of a run as a Gantt-like SVG: one row per attempt, on one time axis from the
//! run's creation. A bar spans the attempt, coloured by outcome; the stretches an executor was
//! attached are solid and the detached rest is hatched; a retrying attempt is followed by a
//! dashed wait until its retry was due. Each bar is labelled with its duration.

use std::fmt::Write;

use chrono::{DateTime, Utc};
use maud::{Markup, PreEscaped};
use rara_store::read::{AttemptView, RunView};

use super::{escape, outcome_name, status_colour};

const LABEL_W: usize = 220;
const AXIS_W: usize = 720;
const ROW_H: usize = 20;
const TOP: usize = 24;

/// Milliseconds from `t0` to `t`.
fn offset(t0: DateTime<Utc>, t: DateTime<Utc>) -> i64 {
    (t - t0).num_milliseconds().max(0)
}

/// The timeline; the attempts of the step named `selected` (and of its children, for a map
/// step) are marked `data-selected`, and the stylesheet fades the others.
pub fn svg(run: &RunView, now: DateTime<Utc>, selected: Option<&str>) -> Markup {
    let mut attempts: Vec<(&str, bool, &AttemptView)> = run
        .steps
        .iter()
        .flat_map(|s| s.attempts.iter().map(move |a| (s.name.as_str(), super::step::is_selected(s, selected), a)))
        .collect();
    attempts.sort_by_key(|(_, _, a)| (a.started_at, a.attempt));
    let t0 = run.created_at;
    let end = run.finished_at.unwrap_or(now);
    let last = attempts.iter().filter_map(|(_, _, a)| a.finished_at.or(a.retry_at)).max().unwrap_or(end).max(end);
    let axis = Axis { t0, span: offset(t0, last).max(1) as f64 };
    let height = TOP + attempts.len().max(1) * ROW_H + 8;
    let width = LABEL_W + AXIS_W + 90;

    let mut out = String::with_capacity(attempts.len() * 500 + 600);
    let _ = write!(
        out,
        r##"<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="attempts over time"><defs><pattern id="detached" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="3" height="6" fill="#64748b"/></pattern></defs><text x="{LABEL_W}" y="14" font-size="11" fill="#475569">0</text><text x="{axis_end}" y="14" font-size="11" fill="#475569" text-anchor="end">{total}</text><line x1="{LABEL_W}" y1="18" x2="{axis_end}" y2="18" stroke="#cbd5e1"/>"##,
        axis_end = LABEL_W + AXIS_W,
        total = human(offset(t0, last)),
    );
    if attempts.is_empty() {
        let _ = write!(
            out,
            r##"<text x="{LABEL_W}" y="{y}" font-size="12" fill="#64748b">no attempt yet</text>"##,
            y = TOP + 14
        );
    }
    for (row, (step, chosen, a)) in attempts.iter().enumerate() {
        attempt(&mut out, &axis, TOP + row * ROW_H, (step, *chosen), a, now);
    }
    out.push_str("</svg>");
    PreEscaped(out)
}

/// The time axis from the run's creation: where an instant falls, in pixels.
struct Axis {
    t0: DateTime<Utc>,
    /// Milliseconds the axis spans (at least 1).
    span: f64,
}

impl Axis {
    fn x(&self, t: DateTime<Utc>) -> usize {
        LABEL_W + (offset(self.t0, t) as f64 / self.span * AXIS_W as f64) as usize
    }
}

/// One attempt's row at height `y`: its label, its bar (hatched where it ran detached), the
/// wait until its retry, and its duration; `selected` marks it as the selection's.
fn attempt(
    out: &mut String,
    axis: &Axis,
    y: usize,
    (step, selected): (&str, bool),
    a: &AttemptView,
    now: DateTime<Utc>,
) {
    let outcome = outcome_name(a.outcome);
    let finished = a.finished_at.unwrap_or(now);
    let (x1, x2) = (axis.x(a.started_at), axis.x(finished).max(axis.x(a.started_at) + 2));
    let colour = status_colour(&outcome);
    let name = escape(step);
    let _ = write!(
        out,
        r##"<g class="attempt" data-step="{name}" data-attempt="{n}" data-outcome="{outcome}"{chosen}><title>{name} attempt {n}: {outcome}, {took}</title><text x="4" y="{ty}" font-size="12" fill="#0f172a">{name} #{n}</text>"##,
        n = a.attempt,
        ty = y + 13,
        took = human(offset(a.started_at, finished)),
        chosen = if selected { r#" data-selected="true""# } else { "" },
    );
    let spans = &a.detached_spans.0;
    if spans.is_empty() {
        let _ = write!(
            out,
            r#"<rect x="{x1}" y="{y}" width="{w}" height="14" rx="2" fill="{colour}"/>"#,
            w = x2 - x1,
            y = y + 2
        );
    } else {
        // Hatched: the attempt ran detached; solid: an executor was attached.
        let _ = write!(
            out,
            r#"<rect class="detached" x="{x1}" y="{y}" width="{w}" height="14" rx="2" fill="url(#detached)"/>"#,
            w = x2 - x1,
            y = y + 2
        );
        for s in spans {
            let (s1, s2) = (axis.x(s.from), axis.x(s.to).max(axis.x(s.from) + 1));
            let _ = write!(
                out,
                r#"<rect x="{s1}" y="{y}" width="{w}" height="14" fill="{colour}"/>"#,
                w = s2 - s1,
                y = y + 2
            );
        }
    }
    if let Some(retry_at) = a.retry_at {
        let _ = write!(
            out,
            r##"<line class="wait" x1="{x2}" y1="{ly}" x2="{x3}" y2="{ly}" stroke="#f59e0b" stroke-dasharray="3 3"/>"##,
            ly = y + 9,
            x3 = axis.x(retry_at),
        );
    }
    let _ = write!(
        out,
        r##"<text x="{tx}" y="{ty}" font-size="11" fill="#475569">{took}</text></g>"##,
        tx = x2 + 4,
        ty = y + 13,
        took = human(offset(a.started_at, finished))
    );
}

fn human(millis: i64) -> String {
    rara_domain::human::duration(std::time::Duration::from_millis(millis.max(0) as u64)).to_string()
}
