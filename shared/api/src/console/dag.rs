//! The run's DAG as SVG, laid out here: a step's column is its depth (the longest chain of
//! dependencies before it), its row its order among the steps of that depth; a depth with more
//! than [`MAX_ROWS`] steps wraps into further columns. Each step is coloured by status and
//! shows its progress; edges run from a dependency to its dependent.

use std::collections::HashMap;
use std::fmt::Write;

use maud::{Markup, PreEscaped};
use rara_store::read::StepView;

use super::{escape, status_colour};

/// Steps per column before a depth wraps.
pub const MAX_ROWS: usize = 40;
const NODE_W: usize = 160;
const NODE_H: usize = 34;
const COL_W: usize = 210;
const ROW_H: usize = 46;
const PAD: usize = 12;

/// Each step's depth: 0 without dependencies, else one more than its deepest dependency.
pub fn depths(steps: &[StepView]) -> Vec<usize> {
    let index: HashMap<&str, usize> = steps.iter().enumerate().map(|(i, s)| (s.name.as_str(), i)).collect();
    let mut depth: Vec<Option<usize>> = vec![None; steps.len()];
    for start in 0..steps.len() {
        // Depth-first without recursion; a definition has no cycle (the plan checked it), and a
        // dependency that is not in the run is ignored.
        let mut stack = vec![start];
        while let Some(&i) = stack.last() {
            if depth[i].is_some() {
                stack.pop();
                continue;
            }
            let deps: Vec<usize> = steps[i].depends_on.iter().filter_map(|d| index.get(d.as_str()).copied()).collect();
            let unresolved: Vec<usize> = deps.iter().copied().filter(|&d| depth[d].is_none()).collect();
            if unresolved.is_empty() || stack.len() > steps.len() {
                depth[i] = Some(deps.iter().filter_map(|&d| depth[d]).max().map_or(0, |m| m + 1));
                stack.pop();
            } else {
                stack.extend(unresolved);
            }
        }
    }
    depth.into_iter().map(|d| d.unwrap_or(0)).collect()
}

/// The SVG of the steps' graph.
pub fn svg(steps: &[StepView]) -> Markup {
    let depths = depths(steps);
    let max_depth = depths.iter().copied().max().unwrap_or(0);
    // Place each step: (column, row), columns of one depth side by side when it wraps.
    let mut by_depth: Vec<Vec<usize>> = vec![Vec::new(); max_depth + 1];
    for (i, &d) in depths.iter().enumerate() {
        by_depth[d].push(i);
    }
    let mut place = vec![(0usize, 0usize); steps.len()];
    let mut column = 0;
    let mut rows = 0;
    for layer in &by_depth {
        for (n, &i) in layer.iter().enumerate() {
            place[i] = (column + n / MAX_ROWS, n % MAX_ROWS);
        }
        rows = rows.max(layer.len().min(MAX_ROWS));
        column += layer.len().div_ceil(MAX_ROWS).max(1);
    }
    let width = column * COL_W + PAD;
    let height = rows * ROW_H + PAD;
    let at = |i: usize| (PAD + place[i].0 * COL_W, PAD + place[i].1 * ROW_H);

    let mut out = String::with_capacity(steps.len() * 600);
    let _ = write!(
        out,
        r#"<svg id="dag" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="the run's steps and their dependencies">"#
    );
    let index: HashMap<&str, usize> = steps.iter().enumerate().map(|(i, s)| (s.name.as_str(), i)).collect();
    out.push_str(r##"<g class="edges" fill="none" stroke="#94a3b8" stroke-width="1.5">"##);
    for (i, step) in steps.iter().enumerate() {
        let (x, y) = at(i);
        for dep in step.depends_on.iter().filter_map(|d| index.get(d.as_str())) {
            let (dx, dy) = at(*dep);
            let (x1, y1, x2, y2) = (dx + NODE_W, dy + NODE_H / 2, x, y + NODE_H / 2);
            let mid = (x1 + x2) / 2;
            let _ = write!(out, r#"<path d="M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}"/>"#);
        }
    }
    out.push_str("</g>");
    for (i, step) in steps.iter().enumerate() {
        let (x, y) = at(i);
        let status = step.status_text();
        let name = escape(&step.name);
        let colour = status_colour(step.status.as_str());
        let bar = (step.progress_fraction().clamp(0.0, 1.0) * (NODE_W - 8) as f64) as usize;
        let _ = write!(
            out,
            r##"<a href="#step-{name}"><g class="step" data-step="{name}" data-status="{status}"><title>{name}: {status} (attempt {attempt}/{max})</title><rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="6" fill="{colour}"/><text x="{tx}" y="{ty}" fill="#fff" font-size="12">{short}</text><rect x="{bx}" y="{by}" width="{bar}" height="3" fill="#fff" opacity="0.8"/></g></a>"##,
            attempt = step.attempt,
            max = step.max_attempts,
            tx = x + 8,
            ty = y + 19,
            short = escape(&truncate(&step.name, 22)),
            bx = x + 4,
            by = y + NODE_H - 6,
        );
    }
    out.push_str("</svg>");
    PreEscaped(out)
}

fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut short: String = text.chars().take(max - 1).collect();
    short.push('…');
    short
}
