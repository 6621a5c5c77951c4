//! The run page's step panel: the step a reader selected (`/runs/{id}?step=NAME`, a link from
//! its node in the graph and its row in the table; the page's script swaps it in without a
//! reload) beside the graph, with its input as stored, the input its latest attempt resolved,
//! its output (an offloaded one as its reference, with a link that downloads it), its error,
//! its attempts with fences (authenticated readers only), durations and errors, and its
//! artifacts with download links (`GET /api/artifacts/{id}`, authenticated readers only).

use chrono::{DateTime, Utc};
use maud::{Markup, html};
use rara_domain::state::{RunStatus, StepStatus};
use rara_domain::stored::Descriptor;
use rara_store::read::{AttemptView, RunView, StepView};

use super::pages::{Viewer, badge, pretty, time};

/// The longest step name a `?step=` parameter may carry (a definition's names are shorter).
pub const MAX_NAME: usize = 512;

/// The href that selects `step` on its run's page (and scrolls to the panel without script).
pub fn select_href(step: &str) -> String {
    let mut query = String::with_capacity(step.len() + 6);
    query.push_str("?step=");
    for byte in step.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.') {
            query.push(byte as char);
        } else {
            query.push_str(&format!("%{byte:02X}"));
        }
    }
    query.push_str("#step-panel");
    query
}

/// Whether the attempts of `step` are the selection's: the selected step's own, and for a
/// selected map step its children's.
pub fn is_selected(step: &StepView, selected: Option<&str>) -> bool {
    selected.is_some_and(|s| step.name == s || step.parent.as_deref() == Some(s))
}

/// The panel of the step named `selected` (or what says there is none).
pub fn panel(
    run: &RunView,
    selected: &str,
    inputs: &[(uuid::Uuid, serde_json::Value)],
    viewer: Viewer<'_>,
    now: DateTime<Utc>,
) -> Markup {
    let Some(step) = run.steps.iter().find(|s| s.name == selected) else {
        return html! {
            aside.panel #step-panel tabindex="-1" aria-label="step details" {
                p { "This run has no step named " code { (selected) } "." } a href="?" { "Close" }
            }
        };
    };
    let input = inputs.iter().find(|(id, _)| *id == step.id).map(|(_, v)| v);
    html! {
        aside.panel #step-panel tabindex="-1" aria-label={ "details of step " (step.name) } data-step=(step.name) {
            p.close { a href="?" { "Close ×" } }
            h2 { (step.name) " " (badge(step.status.as_str())) }
            p.muted {
                code { (step.operation) } @if let Some(v) = &step.version { " " (v) }
                " · attempt " (step.attempt) "/" (step.max_attempts)
                @if let Some(parent) = &step.parent { " · child of " a href=(select_href(parent)) { (parent) } }
                @if !step.depends_on.is_empty() { " · after " (step.depends_on.join(", ")) }
                @if step.carried_from.is_some() { " · carried over by a rerun" }
            }
            (actions(run, step, viewer.csrf))
            h3 { "Input as stored" } p.muted { "secret references, never values" }
            @match input { Some(input) => pre #input-stored tabindex="0" { (pretty(input)) }, None => p.muted { "none" } }
            h3 { "Resolved input" } (resolved(step))
            h3 { "Output" } (output(step, viewer.authenticated))
            @if let Some(error) = &step.error {
                h3 { "Error" }
                pre #step-error tabindex="0" { (error.0.code) ": " (error.0.message) @if error.0.retryable { " (retryable)" } }
            }
            h3 { "Attempts" } (attempts(step, viewer.authenticated, now))
            h3 { "Artifacts" } (artifacts(step, viewer.authenticated))
        }
    }
}

/// The input the step's latest attempt ran with, when its references were resolved.
fn resolved(step: &StepView) -> Markup {
    let latest = step.attempts.iter().rev().find(|a| a.input.is_some());
    html! {
        @match latest {
            Some(a) => {
                p.muted { "as attempt " (a.attempt) " ran with it (secret references kept as references)" }
                pre #input-resolved tabindex="0" { (a.input.as_ref().map(pretty).unwrap_or_default()) }
            }
            None if step.attempts.is_empty() => p.muted #input-resolved { "resolved when its first attempt starts" },
            None => p.muted #input-resolved { "the input as stored: it holds no reference to resolve" },
        }
    }
}

/// The output, or for an offloaded one its reference and a download link.
fn output(step: &StepView, authenticated: bool) -> Markup {
    let Some(output) = &step.output else {
        return html! { p.muted { "none yet" } };
    };
    match Descriptor::of(output) {
        Some(d) => html! {
            p #output-stored {
                "Stored by reference (larger than the inline bound): " code { (d.uri) } " · " (d.size_bytes) " bytes · "
                code { (d.digest) }
                @if let Some(media) = &d.media_type { " · " (media) }
            }
            @if authenticated {
                p { a.download #output-download href={ "/api/steps/" (step.id) "/output" } download { "Download the output" } }
            } @else {
                p.muted { "Sign in (the login URL `rara ui` printed) to download it." }
            }
        },
        None => html! { pre #output tabindex="0" { (pretty(output)) } },
    }
}

fn attempts(step: &StepView, authenticated: bool, now: DateTime<Utc>) -> Markup {
    if step.attempts.is_empty() {
        return html! { p.muted { "none yet" } };
    }
    html! {
        table #attempts {
            thead { tr {
                th { "#" } th { "outcome" }
                @if authenticated { th { "by" } th { "fence" } }
                th { "started" } th { "took" } th { "error" }
            } }
            tbody {
                @for a in &step.attempts {
                    tr data-attempt=(a.attempt) {
                        td { (a.attempt) }
                        td { (badge(&super::outcome_name(a.outcome))) }
                        @if authenticated {
                            td { (a.leased_by) @if let Some(e) = &a.remote_endpoint { " → " (e) } }
                            td.fence { (a.fence) }
                        }
                        td { (time(a.started_at)) }
                        td.took { (took(a, now)) }
                        td { @if let Some(e) = &a.error { (e.0.code) ": " (e.0.message) } }
                    }
                }
            }
        }
    }
}

/// How long an attempt took (or has run so far).
fn took(a: &AttemptView, now: DateTime<Utc>) -> String {
    let millis = (a.finished_at.unwrap_or(now) - a.started_at).num_milliseconds().max(0) as u64;
    let took = rara_domain::human::duration(std::time::Duration::from_millis(millis)).to_string();
    if a.finished_at.is_some() { took } else { format!("{took} so far") }
}

fn artifacts(step: &StepView, authenticated: bool) -> Markup {
    if step.artifacts.is_empty() {
        return html! { p.muted { "none" } };
    }
    html! {
        table #artifacts {
            thead { tr { th { "name" } th { "attempt" } th { "type" } th { "size" } th { "digest" } } }
            tbody {
                @for a in &step.artifacts {
                    tr data-artifact=(a.id) {
                        td {
                            @if authenticated { a.download href={ "/api/artifacts/" (a.id) } download { (a.name) } }
                            @else { (a.name) }
                            br; code.muted { (a.uri) }
                        }
                        td { (a.attempt) }
                        td { (a.media_type.clone().unwrap_or_default()) }
                        td { @if let Some(n) = a.size_bytes { (n) } }
                        td { code { (a.digest.clone().unwrap_or_default()) } }
                    }
                }
            }
        }
        @if !authenticated { p.muted { "Sign in (the login URL `rara ui` printed) to download them." } }
    }
}

/// The cancel, retry and rerun buttons of a step, for a console that may change state.
pub fn actions(run: &RunView, step: &StepView, csrf: Option<&str>) -> Markup {
    let run_id = run.id;
    html! {
        @if let Some(csrf) = csrf {
            @if !is_finished(step.status) {
                form.inline method="post" action={ "/steps/" (step.id) "/cancel" } data-confirm={ "Cancel step " (step.name) "?" } {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="back" value=(run_id);
                    button.cancel-step type="submit" data-step=(step.name) { "Cancel" }
                }
            }
            @if matches!(step.status, StepStatus::Failed | StepStatus::Cancelled) {
                form.inline method="post" action={ "/steps/" (step.id) "/retry" } data-confirm={ "Retry step " (step.name) "?" } {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="back" value=(run_id);
                    button.retry-step type="submit" data-step=(step.name) { "Retry" }
                }
            }
            @if run.status != RunStatus::Running && step.parent.is_none() {
                form.inline method="post" action={ "/runs/" (run_id) "/rerun" } data-confirm={ "Make a new run in which " (step.name) " and what follows run again (the other steps carried over)?" } {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="from" value=(step.name);
                    button.rerun-step type="submit" data-step=(step.name) { "Rerun from here" }
                }
            }
        }
    }
}

pub fn is_finished(status: StepStatus) -> bool {
    matches!(status, StepStatus::Succeeded | StepStatus::Failed | StepStatus::Cancelled | StepStatus::Skipped)
}
