//! The run page's DAG read as geometry: the nodes of a 300-step run (wide depths that wrap, a
//! map of 60 children) from the SVG the page serves over a real Postgres. No two nodes overlap,
//! every node is inside the drawing, and a map's children sit in their map step's frame, under
//! it, in its column.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use axum::http::StatusCode;
use common::Client;
use serde_json::{Value, json};
use sqlx::PgPool;

/// 240 steps whose dependencies a seeded generator picks (the first 50 have none: a depth of 50
/// wraps), a map step `fan` after `s0`, and 59 steps after the map.
fn definition() -> Value {
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |bound: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % bound as u64) as usize
    };
    let mut steps =
        vec![json!({"name": "fan", "operation": "noop", "for_each": {"$output": "s0", "pointer": "/items"},
                                "input": {"item": {"$item": ""}}, "depends_on": ["s0"]})];
    for i in 0..240 {
        let deps: Vec<String> = if i < 50 { vec![] } else { vec![format!("s{}", next(i)), format!("s{}", next(i))] };
        let mut deps: Vec<String> = deps.into_iter().collect::<std::collections::BTreeSet<_>>().into_iter().collect();
        if i >= 200 {
            deps.push("fan".to_owned());
        }
        steps.push(json!({"name": format!("s{i}"), "operation": "noop", "depends_on": deps}));
    }
    json!({"name": "wide", "steps": steps})
}

/// A node of the drawing: its step, map step, and rectangle.
#[derive(Debug)]
struct Node {
    step: String,
    parent: Option<String>,
    x: f64,
    y: f64,
    w: f64,
    h: f64,
}

/// The value of `name="…"` in `tag`.
fn attr(tag: &str, name: &str) -> Option<String> {
    let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    Some(tag[at..at + tag[at..].find('"')?].to_owned())
}

/// Every `<g class="step">` of the SVG with its first `<rect>`.
fn nodes(svg: &str) -> Vec<Node> {
    svg.split(r#"<g class="step""#)
        .skip(1)
        .map(|part| {
            let g = &part[..part.find('>').unwrap()];
            let rect = &part[part.find("<rect").unwrap()..];
            let rect = &rect[..rect.find('>').unwrap()];
            let number = |n: &str| attr(rect, n).unwrap().parse::<f64>().unwrap();
            Node {
                step: attr(g, "data-step").unwrap(),
                parent: attr(g, "data-parent"),
                x: number("x"),
                y: number("y"),
                w: number("width"),
                h: number("height"),
            }
        })
        .collect()
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn a_300_step_run_is_drawn_without_overlaps_and_a_maps_children_in_its_frame(pool: PgPool) {
    let client = Client::new(pool.clone());
    let (status, body) = client.post("/api/runs", json!({"definition": definition()})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let run: uuid::Uuid = body["id"].as_str().unwrap().parse().unwrap();
    // The map expanded as the executor's expand statement leaves it: 60 children named
    // `fan[i]`, each a step of the run with the map as parent.
    sqlx::query(
        "WITH kids AS (
             INSERT INTO steps (id, run_id, position, name, operation, max_attempts, timeout_seconds,
                                retry_initial_delay_ms, retry_max_delay_ms, retry_multiplier, parent_id, map_index)
             SELECT gen_random_uuid(), run_id, position, name || '[' || i || ']', operation, max_attempts,
                    timeout_seconds, retry_initial_delay_ms, retry_max_delay_ms, retry_multiplier, id, i
             FROM steps, generate_series(0, 58) i WHERE run_id = $1 AND name = 'fan'
             RETURNING run_id, name, id)
         INSERT INTO step_names (run_id, name, step_id) SELECT run_id, name, id FROM kids",
    )
    .bind(run)
    .execute(&pool)
    .await
    .unwrap();

    let (status, html) = client.send(axum::http::Method::GET, &format!("/runs/{run}"), None, None).await;
    assert_eq!(status, StatusCode::OK);
    let svg = &html[html.find(r#"<svg id="dag""#).unwrap()..];
    let svg = &svg[..svg.find("</svg>").unwrap()];
    let (width, height): (f64, f64) =
        (attr(svg, "width").unwrap().parse().unwrap(), attr(svg, "height").unwrap().parse().unwrap());
    let nodes = nodes(svg);
    assert_eq!(nodes.len(), 300, "every step is drawn");
    for (i, a) in nodes.iter().enumerate() {
        assert!(a.x >= 0.0 && a.y >= 0.0 && a.x + a.w <= width && a.y + a.h <= height, "{a:?} outside the drawing");
        for b in &nodes[i + 1..] {
            let apart = a.x + a.w <= b.x || b.x + b.w <= a.x || a.y + a.h <= b.y || b.y + b.h <= a.y;
            assert!(apart, "{a:?} overlaps {b:?}");
        }
    }

    let fan = nodes.iter().find(|n| n.step == "fan").unwrap();
    let frame = &svg[svg.find(r#"<rect class="map-group""#).expect("the map's frame")..];
    let frame = &frame[..frame.find('>').unwrap()];
    let [fx, fy, fw, fh] = ["x", "y", "width", "height"].map(|n| attr(frame, n).unwrap().parse::<f64>().unwrap());
    let children: Vec<&Node> = nodes.iter().filter(|n| n.parent.as_deref() == Some("fan")).collect();
    assert_eq!(children.len(), 59);
    assert!(fx <= fan.x && fy <= fan.y, "the frame holds the map step");
    let index = |c: &Node| c.step.trim_start_matches("fan[").trim_end_matches(']').parse::<usize>().unwrap();
    for child in children.iter().filter(|c| index(c) < 40) {
        assert!(child.x < fan.x + fan.w, "{child:?}: the first 40 children are in the map's column");
    }
    for child in children {
        assert!(child.y > fan.y && child.x > fan.x, "{child:?} is not under {fan:?}");
        assert!(child.x >= fx && child.y >= fy && child.x + child.w <= fx + fw && child.y + child.h <= fy + fh);
    }
    let s0 = nodes.iter().find(|n| n.step == "s0").unwrap();
    assert!(fan.x > s0.x + s0.w, "the map is drawn after its dependency");
}
