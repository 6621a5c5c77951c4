//! The console's markup. Every page reads without JavaScript; the inline script only keeps a
//! page live (SSE, [`Updates::Live`] and an authenticated reader only) and asks before a
//! destructive form is sent. Every inline script and style is a constant, allowed by its hash
//! in the Content-Security-Policy ([`inline_scripts`], [`inline_style`], built by the guard); no
//! element carries a `style` attribute (colours are classes, bars are SVG).

use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, PreEscaped, html};
use rara_domain::state::RunStatus;
use rara_store::read::{RunView, StepView};
use uuid::Uuid;

use super::overview::Overview;
use super::{ConsoleQuery, dag, status_colour, step, timeline};
use crate::Updates;
use crate::runs::RunPage;

const BASE_STYLE: &str = r#"
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#0f172a;background:#f8fafc}
header{background:#0f172a;color:#fff;padding:10px 20px}header a{color:#fff;text-decoration:none;font-weight:600}
header .muted{color:#cbd5e1}
main{padding:16px 20px}table{border-collapse:collapse;width:100%;background:#fff}
th,td{text-align:left;padding:6px 8px;border-bottom:1px solid #e2e8f0;vertical-align:top}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;color:#fff;font-size:12px;background:#475569}
.panel{background:#fff;border:1px solid #e2e8f0;border-radius:6px;padding:12px;margin:12px 0;overflow:auto}
pre{background:#f1f5f9;padding:8px;overflow:auto;max-height:300px;margin:4px 0}
form.inline{display:inline}button{cursor:pointer}.muted{color:#64748b}
.progress{vertical-align:middle}figure{display:inline-block;margin:0 16px 8px 0}
:focus-visible{outline:3px solid #f59e0b;outline-offset:2px}
#dag a:focus-visible{outline:none}#dag a:focus-visible>g>rect:first-of-type,#dag a[aria-current]>g>rect:first-of-type{stroke:#f59e0b;stroke-width:4}
.run-grid.selecting{display:grid;grid-template-columns:minmax(0,1fr) minmax(340px,36%);gap:12px;align-items:start}
.run-main{min-width:0}#step-panel{position:sticky;top:8px;max-height:calc(100vh - 16px)}#step-panel .close{float:right;margin:0}
.selecting #timeline .attempt:not([data-selected]){opacity:.3}tr[aria-current]>td:first-child{box-shadow:inset 4px 0 #f59e0b;font-weight:600}
@media (prefers-color-scheme:dark){body{color:#e2e8f0;background:#0b1120}header{background:#020617}
table,.panel{background:#111827;border-color:#334155}th,td{border-color:#334155}pre{background:#1e293b}
a{color:#93c5fd}.muted{color:#94a3b8}rect.map-group{fill:#1e1b4b;stroke:#6366f1}#timeline text{fill:#cbd5e1}}
"#;

/// The statuses and outcomes with a colour of their own (others are grey).
const COLOURED: [&str; 9] =
    ["succeeded", "failed", "lease_expired", "cancelled", "retrying", "running", "leased", "skipped", "waiting"];

/// The page's one stylesheet: the base and a badge colour per status.
static STYLE: LazyLock<String> = LazyLock::new(|| {
    let badges: String =
        COLOURED.iter().map(|s| format!(".badge[data-status={s}]{{background:{}}}\n", status_colour(s))).collect();
    format!("{BASE_STYLE}{badges}")
});

/// The text of the console's `<style>` element.
pub fn inline_style() -> &'static str {
    &STYLE
}

/// The text of every inline `<script>` a page may carry.
pub fn inline_scripts() -> [&'static str; 5] {
    [CONFIRM, LIVE, RUNS_LIVE, RUN_LIVE, WAITS_LIVE]
}

/// A live page's stream (`raraLive(url)`, an `EventSource`), closed when the page is hidden.
/// A browser holds at most six connections to one HTTP/1.1 origin: a page it keeps for "back"
/// (the back/forward cache) with its stream open holds one of them, and after a few live pages
/// the next page's requests wait for a free one (the console's live updates stalled). A page
/// shown again from that cache reloads, to show now and stream again.
const LIVE: &str = r#"window.raraLive=u=>{const es=new EventSource(u);addEventListener('pagehide',()=>es.close());
addEventListener('pageshow',e=>{if(e.persisted)location.reload();});return es;};"#;

/// Keeps the runs list live, and the overview above it (at most every 5 s).
const RUNS_LIVE: &str = r#"(()=>{if(!window.EventSource)return;let busy=false,last=0;const es=raraLive('/events');
es.addEventListener('changed',async()=>{if(busy)return;busy=true;try{const r=await fetch('/fragments/runs'+location.search);
if(r.ok)document.getElementById('runs').innerHTML=await r.text();const o=document.getElementById('overview');
if(o&&Date.now()-last>5000){last=Date.now();const f=await fetch('/fragments/overview'+location.search);if(f.ok)o.outerHTML=await f.text();}}
finally{busy=false;}});})();"#;

/// Keeps the inbox live, except while the reader is filling one of its forms.
pub(super) const WAITS_LIVE: &str = r#"(()=>{if(!window.EventSource)return;let busy=false;const es=raraLive('/events');
es.addEventListener('changed',async()=>{const t=document.getElementById('waits');if(busy||t.contains(document.activeElement)||
[...t.querySelectorAll('textarea,input[name=reason]')].some(f=>f.value))return;busy=true;try{const r=await fetch('/fragments/waits');
if(r.ok)t.innerHTML=await r.text();}finally{busy=false;}});})();"#;

/// Keeps a run page live (its stream is the page's path + `/events`), and selects a step
/// without a reload: the link's `?step=` goes in the address and the fragment of that
/// selection replaces the live part (also on each update while a step is selected).
const RUN_LIVE: &str = r#"(()=>{const live=document.getElementById('live');const swap=h=>{live.innerHTML=h;};
const load=async()=>{const r=await fetch(location.pathname+'/fragment'+location.search);if(r.ok)swap(await r.text());};
live.addEventListener('click',async e=>{const a=e.target.closest('a.select,#step-panel .close a');
if(!a||e.ctrlKey||e.metaKey||e.shiftKey||e.button)return;e.preventDefault();history.pushState(null,'',a.getAttribute('href'));
await load();const p=document.getElementById('step-panel');if(p)p.focus();});addEventListener('popstate',load);
if(!window.EventSource)return;const es=raraLive(location.pathname+'/events');
es.addEventListener('update',e=>{if(new URLSearchParams(location.search).get('step'))load();else swap(e.data);});})();"#;

/// Who a page is for and how it updates.
#[derive(Debug, Clone, Copy)]
pub struct Viewer<'a> {
    /// The CSRF token of the forms, when the reader may act (else the page is read-only).
    pub csrf: Option<&'a str>,
    /// Whether the reader is authenticated: only then are fences and lease data shown, and the
    /// page live.
    pub authenticated: bool,
    pub updates: Updates,
}

impl Viewer<'_> {
    pub(super) fn live(&self) -> bool {
        self.updates == Updates::Live && self.authenticated
    }
}

/// Forms that change state ask first (the page works without it: the server still checks).
const CONFIRM: &str = r#"document.addEventListener('submit',e=>{const m=e.target.dataset.confirm;if(m&&!confirm(m))e.preventDefault();});"#;

/// Said on a page that does not update itself ([`Updates::Static`]).
pub(super) const RELOAD: &str = "This page does not update itself here: reload it to see changes.";

/// The page's live script, when the page is live.
pub(super) fn live_script(viewer: Viewer<'_>, script: &'static str) -> Option<&'static str> {
    viewer.live().then_some(script)
}

/// What a page without forms says: how to get them.
pub(super) fn read_only(updates: Updates) -> &'static str {
    match updates {
        Updates::Live => "Read-only: open the login URL `rara ui` printed to act on runs and see them live.",
        Updates::Static => "Read-only: only the API's operators act on runs.",
    }
}

pub(super) fn layout(title: &str, body: Markup, script: Option<&str>) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · rara" }
                style { (PreEscaped(inline_style())) }
            }
            body {
                header { nav aria-label="console" { a href="/" { "rara" } " " span.muted { "console" } " · " a href="/waits" { "waiting steps" }
                    " · " a href="/schedules" { "schedules" } " · " a href="/limits" { "limits" } " · " a href="/dlq" { "dead letters" } } }
                main { (body) }
                script { (PreEscaped(CONFIRM)) }
                @if let Some(script) = script { script { (PreEscaped(LIVE)) } script { (PreEscaped(script)) } }
            }
        }
    }
}

pub(super) fn badge(status: &str) -> Markup {
    html! { span.badge data-status=(status) { (status) } }
}

pub(super) fn time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S").to_string()
}

/// The landing page: the overview (when given) above the runs list, live.
pub fn runs(query: &ConsoleQuery, page: &RunPage, viewer: Viewer<'_>, overview: Option<&Overview>) -> Markup {
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    let status = text(&query.status);
    let wheres: Vec<&String> = query.wheres.iter().filter(|w| !w.trim().is_empty()).collect();
    let body = html! {
        @if let Some(o) = overview { h1 { "Overview" } (super::overview::section(o)) h2 { "Runs" } } @else { h1 { "Runs" } }
        form #search method="get" action="/" {
            label { "status " select name="status" {
                option value="" { "any" }
                @for s in ["running", "succeeded", "failed", "cancelled"] {
                    option value=(s) selected[status == s] { (s) }
                }
            } }
            " "
            label { "name " input name="name" value=(text(&query.name)); }
            " " label { "created from " input type="datetime-local" step="1" name="from" value=(text(&query.from)); } " "
            label { "to " input type="datetime-local" step="1" name="to" value=(text(&query.to)); } " UTC"
            br;
            label { "error code " input name="error" value=(text(&query.error)) placeholder="E_TIMEOUT"; } " "
            label { "workflow " input name="workflow" value=(text(&query.workflow)) placeholder="name@version"; } " "
            @for w in &wheres { label { "where " input name="where" value=(w); } " " }
            @if wheres.len() < crate::filters::MAX_WHERE {
                label { "where " input name="where" value="" placeholder="inputs.tenant=acme"; } " "
            }
            button type="submit" { "Filter" }
        }
        div #runs { (runs_table(query, page)) }
        @if let Some(csrf) = viewer.csrf {
            div.panel {
                "Bulk action on every run this filter matches: "
                @for (action, label) in [("cancel", "Cancel running runs…"), ("retry", "Retry failed steps…")] {
                    form.inline method="post" action="/bulk" {
                        input type="hidden" name="csrf" value=(csrf);
                        input type="hidden" name="action" value=(action);
                        (query.hidden())
                        button type="submit" { (label) }
                    }
                    " "
                }
            }
        } @else {
            p.muted { (read_only(viewer.updates)) }
        }
        @if !viewer.live() { p.muted #static-page { (RELOAD) } }
    };
    layout("Runs", body, live_script(viewer, RUNS_LIVE))
}

/// The table of the runs list (what `/fragments/runs` answers when a run changes).
pub fn runs_table(query: &ConsoleQuery, page: &RunPage) -> Markup {
    html! {
        table {
            thead { tr { th { "run" } th { "name" } th { "status" } th { "steps" } th { "created" } th { "finished" } } }
            tbody {
                @for r in &page.runs {
                    tr data-run=(r.id) {
                        td { a href={ "/runs/" (r.id) } { code { (r.id) } } }
                        td { (r.name) }
                        td { (badge(r.status.as_str())) }
                        td { (r.steps_finished) "/" (r.steps_total) }
                        td { (time(r.created_at)) }
                        td { @if let Some(f) = r.finished_at { (time(f)) } }
                    }
                }
                @if page.runs.is_empty() { tr { td colspan="6" .muted { "no run" } } }
            }
        }
        @if let Some(next) = &page.next_cursor {
            p { a href={ "/?cursor=" (next) (query.params()) } { "older runs →" } }
        }
    }
}

/// A run page around its live part.
pub fn run(id: Uuid, status: RunStatus, live: String, viewer: Viewer<'_>) -> Markup {
    let body = html! {
        @if viewer.csrf.is_none() { p.muted { (read_only(viewer.updates)) } }
        @if !viewer.live() { p.muted #static-page { (RELOAD) } }
        div #live { (PreEscaped(live)) }
    };
    layout(&format!("Run {id} ({status})"), body, live_script(viewer, RUN_LIVE))
}

/// The live part of a run page: header, actions, DAG, timeline, steps, and the panel of the
/// selected step beside them (fences and holders only for an authenticated reader, as
/// `crate::redact` says).
pub fn run_live(
    run: &RunView,
    inputs: &[(Uuid, serde_json::Value)],
    viewer: Viewer<'_>,
    now: DateTime<Utc>,
    selected: Option<&str>,
) -> Markup {
    let csrf = viewer.csrf;
    let finished = run.steps.iter().filter(|s| step::is_finished(s.status)).count();
    html! {
        h1 { (run.name) " " span #run-status { (badge(run.status.as_str())) } }
        @if let Some(of) = run.rerun_of { p #rerun-of { "Rerun of " a href={ "/runs/" (of) } { code { (of) } } } }
        @if let Some(parent) = &run.parent {
            p #parent { "Child of " a href={ "/runs/" (parent.run_id) } { code { (parent.run_id) } } " (step " (parent.step) ")" }
        }
        @if !run.children.is_empty() {
            p #children { "Child runs: " @for c in &run.children { a href={ "/runs/" (c.run_id) } { (c.step) " " code { (c.run_id) } } " " } }
        }
        @if !run.reruns.is_empty() {
            p #reruns { "Reruns: " @for r in &run.reruns { a href={ "/runs/" (r) } { code { (r) } } " " } }
        }
        p.muted {
            "run " code { (run.id) } " · created " (time(run.created_at))
            @if let Some(f) = run.finished_at { " · finished " (time(f)) }
            " · " (finished) "/" (run.steps.len()) " steps finished"
            @if let Some(key) = &run.idempotency_key { " · key " code { (key) } }
            @if let Some(d) = rara_domain::stored::Descriptor::of(&run.inputs) {
                span #inputs-stored { " · inputs by reference (in the artifact store): " (d.size_bytes) " bytes " code { (d.digest) } }
            }
        }
        @if let (Some(csrf), RunStatus::Running) = (csrf, run.status) {
            form.inline method="post" action={ "/runs/" (run.id) "/cancel" } data-confirm="Cancel every unfinished step of this run?" {
                input type="hidden" name="csrf" value=(csrf);
                input name="reason" placeholder="reason (optional)" aria-label="reason (optional)";
                " " button #cancel-run type="submit" { "Cancel run" }
            }
        }
        div.run-grid.selecting[selected.is_some()] {
            div.run-main {
                div.panel { h2 { "Steps" } p.muted { "Select a step for its input, output, attempts and artifacts." } (dag::svg(&run.steps, selected)) }
                div.panel tabindex="0" role="region" aria-label="attempts" { h2 { "Attempts" } (timeline::svg(run, now, selected)) }
                @if let Some(output) = &run.output { div.panel { h2 { "Output" } pre tabindex="0" { (pretty(output)) } } }
                div.panel {
                    h2 { "Step details" }
                    table {
                        thead { tr { th { "step" } th { "operation" } th { "status" } th { "attempt" } th { "progress" } th { "actions" } } }
                        tbody { @for s in &run.steps { (step_row(run, s, viewer, selected)) } }
                    }
                }
            }
            @if let Some(name) = selected { (step::panel(run, name, inputs, viewer, now)) }
        }
    }
}

pub(super) fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

fn step_row(run: &RunView, step: &StepView, viewer: Viewer<'_>, selected: Option<&str>) -> Markup {
    let fraction = step.progress_fraction().clamp(0.0, 1.0);
    let current = (selected == Some(step.name.as_str())).then_some("true");
    html! {
        tr id={ "step-" (step.name) } data-step=(step.name) data-status=(step.status.as_str()) aria-current=[current] {
            td { a.select href=(step::select_href(&step.name)) { (step.name) } }
            td { code { (step.operation) } @if let Some(v) = &step.version { " " span.muted { (v) } } }
            td {
                (badge(step.status.as_str()))
                @if step.is_detached() { " " span.muted { "(detached)" } }
                @if step.carried_from.is_some() { " " span.muted { "(carried over)" } }
                @if let Some(what) = &step.waiting_for { " " span.muted { "(" (what) ") " a href="/waits" { "inbox" } } }
            }
            td { (step.attempt) "/" (step.max_attempts) }
            td {
                svg.progress width="80" height="6" aria-hidden="true" {
                    rect width="80" height="6" rx="3" fill="#e2e8f0" {}
                    rect width=(format!("{:.1}", fraction * 80.0)) height="6" rx="3" fill="#2563eb" {}
                }
                @if let Some(p) = &step.progress { " " span.muted { (p.message) } }
            }
            td { (step::actions(run, step, viewer.csrf)) }
        }
    }
}
