//! The overview, above the runs list on the landing page (`/`): the state now (runs running,
//! waiting, failed in the last hour; due steps and the oldest one's age), and over a window (the
//! last hour by minute, or with `?window=day` the last day by 15 minutes) the attempts by
//! outcome as an SVG chart, the operations (attempts, failure rate, p50/p95 duration) and the
//! commonest error codes with runs they failed in. Each number is one indexed statement of
//! `rara_store::overview`; the day reads 24 times the attempts, so it is asked for, not the
//! landing's default (`tools/console-bench --history`). `/fragments/overview` renders the
//! section again for the live page (at most every few seconds, the script says).

use std::fmt::Write;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::response::Html;
use axum::routing::get;
use chrono::{DateTime, Duration, Utc};
use maud::{Markup, PreEscaped, html};
use rara_store::overview::{Bucket, DUE_COUNTED, ErrorStats, Now, OperationStats, Window};

use super::status_colour;
use crate::{Api, Error, Reader};

/// Rows of the operations and errors tables.
const TOP: i64 = 10;
const CHART_W: usize = 600;
const CHART_H: usize = 120;

/// One chart: its title, window and bucket width, and the attempts per bucket.
#[derive(Debug)]
pub struct Chart {
    pub title: &'static str,
    pub window: Window,
    pub bucket_seconds: i64,
    pub buckets: Vec<Bucket>,
}

/// The overview's window: the last hour or the last day.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Span {
    #[default]
    Hour,
    Day,
}

/// Everything the overview shows, read at one instant.
#[derive(Debug)]
pub struct Overview {
    pub span: Span,
    pub now: Now,
    pub chart: Chart,
    pub operations: Vec<OperationStats>,
    pub errors: Vec<ErrorStats>,
}

pub(super) fn routes() -> axum::Router<Api> {
    axum::Router::new().route("/fragments/overview", get(fragment))
}

async fn fragment(
    State(api): State<Api>,
    _: Reader,
    query: Result<Query<SpanQuery>, QueryRejection>,
) -> Result<Html<String>, Error> {
    let Query(query) = query?;
    Ok(Html(section(&load(&api, Utc::now(), query.window.unwrap_or_default()).await?).into_string()))
}

/// The fragment's query: the window.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct SpanQuery {
    pub window: Option<Span>,
}

/// The overview at `at` over `span`.
pub async fn load(api: &Api, at: DateTime<Utc>, span: Span) -> Result<Overview, Error> {
    let store = api.store();
    let hour = Window { from: at - Duration::hours(1), to: at };
    let (title, window, bucket_seconds) = match span {
        Span::Hour => ("last hour, per minute", hour, 60),
        Span::Day => ("last day, per 15 minutes", Window { from: at - Duration::days(1), to: at }, 900),
    };
    let read = store.overview(hour, window, bucket_seconds, TOP).await?;
    Ok(Overview {
        span,
        now: read.now,
        chart: Chart { title, window, bucket_seconds, buckets: read.chart },
        operations: read.operations,
        errors: read.errors,
    })
}

/// The overview's section (what `/fragments/overview` answers).
pub fn section(o: &Overview) -> Markup {
    let now = &o.now;
    let span = if o.span == Span::Day { "last day" } else { "last hour" };
    let age = now.oldest_due.map(|t| human_ms((o.chart.window.to - t).num_milliseconds().max(0) as f64));
    html! {
        section #overview {
            div.panel #now {
                a #running href="/?status=running" { strong { (now.running) } " running" } " · "
                a #waiting href="/waits" { strong { (now.waiting) } " waiting" } " · "
                a #failed href="/?status=failed" { strong { (now.failed) } " failed in the last hour" } " · "
                span #due { strong { (now.due) @if now.due >= DUE_COUNTED { "+" } } " due steps"
                    @if let Some(age) = age { ", the oldest due " (age) " ago" } }
            }
            div.panel.charts {
                p #span {
                    @for (span, label, href) in [(Span::Hour, "last hour", "/"), (Span::Day, "last day", "/?window=day")] {
                        @if o.span == span { strong { (label) } } @else { a href=(href) { (label) } } " "
                    }
                }
                figure {
                    figcaption { "Attempts, " (o.chart.title) }
                    (chart_svg(&o.chart))
                }
                p.muted.legend {
                    span.badge data-status="succeeded" { "succeeded" } " "
                    span.badge data-status="retrying" { "retried" } " "
                    span.badge data-status="failed" { "failed" }
                    " attempts, by when they started"
                }
            }
            div.panel { h2 { "Operations, " (span) } (operations(&o.operations, span)) }
            div.panel { h2 { "Top errors, " (span) } (errors(&o.errors, span)) }
        }
    }
}

fn operations(rows: &[OperationStats], span: &str) -> Markup {
    let ms = |v: Option<f64>| v.map(|v| human_ms(v.max(0.0))).unwrap_or_default();
    html! {
        table #operations {
            thead { tr { th { "operation" } th { "attempts" } th { "failure rate" } th { "p50" } th { "p95" } } }
            tbody {
                @for r in rows {
                    tr data-operation=(r.operation) {
                        td { code { (r.operation) } }
                        td { (r.attempts) }
                        td { (format!("{:.1} %", 100.0 * r.failures as f64 / r.attempts.max(1) as f64)) }
                        td { (ms(r.p50_ms)) } td { (ms(r.p95_ms)) }
                    }
                }
                @if rows.is_empty() { tr { td colspan="5" .muted { "no attempt in the " (span) } } }
            }
        }
    }
}

fn errors(rows: &[ErrorStats], span: &str) -> Markup {
    html! {
        table #errors {
            thead { tr { th { "error code" } th { "attempts" } th { "last seen" } th { "failing runs" } } }
            tbody {
                @for r in rows {
                    @let code = r.code.clone().unwrap_or_else(|| "(none)".into());
                    tr data-code=(code) {
                        td { code { (code) } }
                        td { (r.attempts) }
                        td { (r.last_seen.format("%Y-%m-%d %H:%M:%S")) }
                        td { @for run in &r.runs { a href={ "/runs/" (run) } { code { (run.to_string()[..8]) } } " " } }
                    }
                }
                @if rows.is_empty() { tr { td colspan="4" .muted { "no error in the " (span) } } }
            }
        }
    }
}

/// A duration of `ms` milliseconds as people read it.
fn human_ms(ms: f64) -> String {
    rara_domain::human::duration(std::time::Duration::from_micros((ms * 1000.0) as u64)).to_string()
}

/// A chart: one stacked bar per bucket (succeeded, retried, failed from the bottom), scaled to
/// the busiest bucket, with the count of the busiest on the axis.
pub fn chart_svg(chart: &Chart) -> Markup {
    let slots = ((chart.window.to - chart.window.from).num_seconds() / chart.bucket_seconds.max(1)).max(1) as usize;
    let peak = chart.buckets.iter().map(|b| b.succeeded + b.retried + b.failed).max().unwrap_or(0).max(1);
    let (left, top) = (40, 6);
    let bar_w = CHART_W as f64 / slots as f64;
    let scale = CHART_H as f64 / peak as f64;
    let mut out = String::with_capacity(chart.buckets.len() * 300 + 600);
    let _ = write!(
        out,
        r##"<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="attempts {title}: peak {peak}"><line x1="{left}" y1="{base}" x2="{right}" y2="{base}" stroke="#94a3b8"/><text x="{tx}" y="{ty}" font-size="10" text-anchor="end" fill="currentColor">{peak}</text><text x="{tx}" y="{base}" font-size="10" text-anchor="end" fill="currentColor">0</text>"##,
        w = CHART_W + left + 4,
        h = CHART_H + top + 16,
        title = chart.title,
        base = top + CHART_H,
        right = left + CHART_W,
        tx = left - 4,
        ty = top + 8,
    );
    for b in chart.buckets.iter().filter(|b| (0..slots as i64).contains(&b.bucket)) {
        let x = left as f64 + b.bucket as f64 * bar_w;
        let mut y = (top + CHART_H) as f64;
        let _ = write!(
            out,
            r#"<g class="bucket" data-bucket="{n}" data-succeeded="{s}" data-retried="{r}" data-failed="{f}"><title>{s} succeeded, {r} retried, {f} failed</title>"#,
            n = b.bucket,
            s = b.succeeded,
            r = b.retried,
            f = b.failed
        );
        for (count, status) in [(b.succeeded, "succeeded"), (b.retried, "retrying"), (b.failed, "failed")] {
            if count == 0 {
                continue;
            }
            let h = count as f64 * scale;
            y -= h;
            let _ = write!(
                out,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{c}"/>"#,
                w = (bar_w - 1.0).max(1.0),
                c = status_colour(status)
            );
        }
        out.push_str("</g>");
    }
    out.push_str("</svg>");
    PreEscaped(out)
}
