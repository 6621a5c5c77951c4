//! The run's DAG as SVG, laid out here. A step's column is its depth (the longest chain of
//! dependencies before it); the steps of one depth are stacked in that column in definition
//! order, and a depth taller than [`MAX_ROWS`] rows wraps into further columns. A map step's
//! children are drawn under it, in its column, inside one frame (`map-group`): a map of more
//! than [`MAX_ROWS`] children spreads them over sub-columns of the frame. Each step is coloured
//! by status and shows its progress; edges run from a dependency to its dependent (a child has
//! none: its frame says where it belongs). No two nodes overlap: blocks are stacked, never
//! placed over one another.

use std::collections::HashMap;
use std::fmt::Write;

use maud::{Markup, PreEscaped};
use rara_store::read::StepView;

use super::{escape, status_colour};

/// Rows per column before a depth wraps (and children per sub-column of a map's frame).
pub const MAX_ROWS: usize = 40;
const NODE_W: usize = 160;
const NODE_H: usize = 34;
const COL_W: usize = 210;
const ROW_H: usize = 46;
const PAD: usize = 12;
/// How far a map's children sit to the right of their map step.
const INDENT: usize = 14;
/// The frame's margin around a map step and its children.
const FRAME: usize = 5;

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

/// Where a step is drawn: its node's top-left corner and width, in pixels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Node {
    pub x: usize,
    pub y: usize,
    pub w: usize,
}

/// A map step's frame around itself and its children: x, y, width, height in pixels.
type Frame = (usize, usize, usize, usize);

/// A step with the children drawn under it (none but for a map step), and its size in cells.
#[derive(Clone)]
struct Block {
    step: usize,
    children: Vec<usize>,
}

impl Block {
    fn cols(&self) -> usize {
        self.children.len().div_ceil(MAX_ROWS).max(1)
    }

    fn rows(&self) -> usize {
        1 + self.children.len().min(MAX_ROWS)
    }
}

/// The blocks of each depth, in definition order: a map's children are their map step's (a
/// child whose map step is not in the run stands alone, at its own depth).
fn blocks(steps: &[StepView]) -> Vec<Vec<Block>> {
    let index: HashMap<&str, usize> = steps.iter().enumerate().map(|(i, s)| (s.name.as_str(), i)).collect();
    let parent_of = |i: usize| steps[i].parent.as_deref().and_then(|p| index.get(p).copied()).filter(|&p| p != i);
    let depths = depths(steps);
    let mut layers: Vec<Vec<Block>> = vec![Vec::new(); depths.iter().copied().max().map_or(0, |m| m + 1)];
    let mut block_of: HashMap<usize, (usize, usize)> = HashMap::new();
    for i in (0..steps.len()).filter(|&i| parent_of(i).is_none()) {
        block_of.insert(i, (depths[i], layers[depths[i]].len()));
        layers[depths[i]].push(Block { step: i, children: Vec::new() });
    }
    for i in 0..steps.len() {
        if let Some((d, b)) = parent_of(i).and_then(|p| block_of.get(&p).copied()) {
            layers[d][b].children.push(i);
        } else if parent_of(i).is_some() {
            layers[depths[i]].push(Block { step: i, children: Vec::new() });
        }
    }
    layers
}

/// The layout: each step's node, each map's frame, and the drawing's width and height.
pub fn layout(steps: &[StepView]) -> (Vec<Node>, Vec<Frame>, usize, usize) {
    let mut nodes = vec![Node::default(); steps.len()];
    let mut frames = Vec::new();
    let (mut column, mut rows) = (0, 0);
    let cell = |col: usize, row: usize| (PAD + col * COL_W, PAD + row * ROW_H);
    for layer in blocks(steps) {
        // Blocks are stacked down a group of columns as wide as its widest block; a block that
        // would pass the last row starts the next group.
        let (mut row, mut width) = (0, 1);
        for block in &layer {
            if row > 0 && row + block.rows() > MAX_ROWS + 1 {
                (column, row, width) = (column + width, 0, 1);
            }
            let (x, y) = cell(column, row);
            nodes[block.step] = Node { x, y, w: NODE_W };
            for (n, &child) in block.children.iter().enumerate() {
                let (cx, cy) = cell(column + n / MAX_ROWS, row + 1 + n % MAX_ROWS);
                nodes[child] = Node { x: cx + INDENT, y: cy, w: NODE_W - INDENT };
            }
            if !block.children.is_empty() {
                let (w, h) = ((block.cols() - 1) * COL_W + NODE_W, (block.rows() - 1) * ROW_H + NODE_H);
                frames.push((x - FRAME, y - FRAME, w + 2 * FRAME, h + 2 * FRAME));
            }
            row += block.rows();
            width = width.max(block.cols());
            rows = rows.max(row);
        }
        column += width;
    }
    (nodes, frames, column * COL_W + PAD, rows.max(1) * ROW_H + PAD)
}

/// The SVG of the steps' graph, the step named `selected` marked (`aria-current`).
pub fn svg(steps: &[StepView], selected: Option<&str>) -> Markup {
    let (nodes, frames, width, height) = layout(steps);
    let mut out = String::with_capacity(steps.len() * 600);
    let _ = write!(
        out,
        r#"<svg id="dag" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="group" aria-label="the run's steps and their dependencies">"#
    );
    for (x, y, w, h) in frames {
        let _ = write!(
            out,
            r##"<rect class="map-group" x="{x}" y="{y}" width="{w}" height="{h}" rx="8" fill="#eef2ff" stroke="#a5b4fc"/>"##
        );
    }
    let index: HashMap<&str, usize> = steps.iter().enumerate().map(|(i, s)| (s.name.as_str(), i)).collect();
    out.push_str(r##"<g class="edges" fill="none" stroke="#94a3b8" stroke-width="1.5">"##);
    for (i, step) in steps.iter().enumerate() {
        let to = nodes[i];
        for dep in step.depends_on.iter().filter_map(|d| index.get(d.as_str())) {
            let from = nodes[*dep];
            let (x1, y1, x2, y2) = (from.x + from.w, from.y + NODE_H / 2, to.x, to.y + NODE_H / 2);
            let mid = (x1 + x2) / 2;
            let _ = write!(out, r#"<path d="M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}"/>"#);
        }
    }
    out.push_str("</g>");
    for (step, node) in steps.iter().zip(&nodes) {
        node_svg(&mut out, step, *node, selected == Some(step.name.as_str()));
    }
    out.push_str("</svg>");
    PreEscaped(out)
}

/// One step's node: a link that selects it (its panel), coloured by status, with its progress bar.
fn node_svg(out: &mut String, step: &StepView, Node { x, y, w }: Node, selected: bool) {
    let status = step.status_text();
    let name = escape(&step.name);
    let colour = status_colour(step.status.as_str());
    let bar = (step.progress_fraction().clamp(0.0, 1.0) * (w - 8) as f64) as usize;
    let parent = step.parent.as_deref().map(|p| format!(r#" data-parent="{}""#, escape(p))).unwrap_or_default();
    let href = escape(&super::step::select_href(&step.name));
    let current = if selected { r#" aria-current="true""# } else { "" };
    let _ = write!(
        out,
        r##"<a class="select" href="{href}"{current} aria-label="{name}: {status}"><g class="step" data-step="{name}" data-status="{status}"{parent}><title>{name}: {status} (attempt {attempt}/{max})</title><rect x="{x}" y="{y}" width="{w}" height="{NODE_H}" rx="6" fill="{colour}"/><text x="{tx}" y="{ty}" fill="#fff" font-size="12">{short}</text><rect x="{bx}" y="{by}" width="{bar}" height="3" fill="#fff" opacity="0.8"/></g></a>"##,
        attempt = step.attempt,
        max = step.max_attempts,
        tx = x + 8,
        ty = y + 19,
        short = escape(&truncate(&step.name, if w < NODE_W { 20 } else { 22 })),
        bx = x + 4,
        by = y + NODE_H - 6,
    );
}

fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut short: String = text.chars().take(max - 1).collect();
    short.push('…');
    short
}
