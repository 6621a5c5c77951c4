//! The console's inbox (`/waits`): every step waiting across runs, the oldest first, each with
//! its form: a signal's approve (a JSON payload, checked against the wait's schema) and reject
//! (a reason), an event's send (its name and key fixed, a payload). A timer has no form: it
//! completes on its own. Forms carry the CSRF token and a fresh idempotency id (a form sent
//! twice is one delivery); the answer is a page that says what changed, or the inbox again with
//! the refusal above it (a payload that fails the schema names the field). Live like the runs
//! list: a change anywhere re-renders the table.

use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Form, Query, State};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use maud::{Markup, html};
use rara_store::waits::WaitView;
use serde::Deserialize;
use uuid::Uuid;

use super::pages::{self, Viewer};
use super::{forms, viewer};
use crate::auth::Credentials;
use crate::waits::{EventRequest, SignalRequest, deliver, receive};
use crate::{Api, Error, Reader};

/// At most this many waits on the page (the oldest first; `GET /api/waits` pages further).
const SHOWN: u32 = 200;

pub(super) fn routes() -> axum::Router<Api> {
    axum::Router::new()
        .route("/waits", get(inbox_page))
        .route("/fragments/waits", get(inbox_fragment))
        .route("/waits/signal", post(signal_form))
        .route("/waits/event", post(event_form))
}

/// The inbox's query: nothing but a refusal of what does not belong.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InboxQuery {}

async fn inbox_page(
    State(api): State<Api>,
    reader: Reader,
    credentials: Credentials,
    query: Result<Query<InboxQuery>, QueryRejection>,
) -> Result<Html<String>, Error> {
    query?;
    let csrf = forms(&api, &credentials);
    let waits = api.store().waits(None, SHOWN).await?;
    Ok(Html(page(&waits, viewer(&api, reader, csrf.as_deref()), None).into_string()))
}

async fn inbox_fragment(
    State(api): State<Api>,
    reader: Reader,
    credentials: Credentials,
) -> Result<Html<String>, Error> {
    let csrf = forms(&api, &credentials);
    let waits = api.store().waits(None, SHOWN).await?;
    Ok(Html(table(&waits, viewer(&api, reader, csrf.as_deref()), chrono::Utc::now()).into_string()))
}

/// A signal form: approve (with `data`) or reject (with `reason`).
#[derive(Debug, Clone, Deserialize)]
pub struct SignalForm {
    pub csrf: String,
    pub run: Uuid,
    pub name: String,
    /// The idempotency id the form was rendered with.
    pub id: String,
    /// `approve` or `reject`.
    pub decision: String,
    #[serde(default)]
    pub data: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// An event form.
#[derive(Debug, Clone, Deserialize)]
pub struct EventForm {
    pub csrf: String,
    pub name: String,
    pub key: String,
    pub id: String,
    #[serde(default)]
    pub payload: Option<String>,
}

/// A form's JSON text (empty: `{}`); `field` names it in a refusal.
fn json_field(text: Option<&str>, field: &str) -> Result<serde_json::Value, Error> {
    match text.map(str::trim).filter(|t| !t.is_empty()) {
        None => Ok(serde_json::json!({})),
        Some(text) => serde_json::from_str(text)
            .map_err(|e| Error::bad_request(format!("{field} is not JSON: {e}")).with_field(field)),
    }
}

async fn signal_form(
    State(api): State<Api>,
    reader: Reader,
    credentials: Credentials,
    form: Result<Form<SignalForm>, FormRejection>,
) -> Result<Response, Error> {
    let Form(form) = form?;
    api.auth().check_form(&credentials.headers, credentials.caller.as_ref(), &form.csrf)?;
    let request = match form.decision.as_str() {
        "approve" => json_field(form.data.as_deref(), "data").map(|data| SignalRequest {
            data: Some(data),
            id: Some(form.id.clone()),
            reject: None,
        }),
        "reject" => Ok(SignalRequest {
            data: None,
            id: Some(form.id.clone()),
            reject: Some(form.reason.clone().filter(|r| !r.trim().is_empty()).unwrap_or_else(|| "rejected".into())),
        }),
        _ => Err(Error::bad_request("the decision is approve or reject").with_field("decision")),
    };
    let answer = match request {
        Ok(request) => deliver(&api, form.run, &form.name, request).await,
        Err(e) => Err(e),
    };
    let done = answer.map(|r| {
        let what = if form.decision == "reject" { "rejected" } else { "approved" };
        let steps = if r.steps.is_empty() { "no step".to_owned() } else { r.steps.join(", ") };
        let paused = if r.paused { " (the run is paused: applied when it is resumed)" } else { "" };
        (format!("Signal {} {} ({}): {steps}{paused}.", form.name, r.delivery, what), Some(form.run))
    });
    answer_page(&api, reader, &credentials, done).await
}

async fn event_form(
    State(api): State<Api>,
    reader: Reader,
    credentials: Credentials,
    form: Result<Form<EventForm>, FormRejection>,
) -> Result<Response, Error> {
    let Form(form) = form?;
    api.auth().check_form(&credentials.headers, credentials.caller.as_ref(), &form.csrf)?;
    let answer = match json_field(form.payload.as_deref(), "payload") {
        Ok(payload) => {
            let key = serde_json::Value::String(form.key.clone());
            receive(&api, EventRequest { name: form.name.clone(), key, payload: Some(payload), id: Some(form.id) })
                .await
        }
        Err(e) => Err(e),
    };
    let done = answer.map(|r| {
        let fresh = if r.fresh { "sent" } else { "already received (the same id): nothing changed" };
        (format!("Event {} (key {}) {fresh}; it completed {} wait(s).", form.name, form.key, r.completed), None)
    });
    answer_page(&api, reader, &credentials, done).await
}

/// What a form changed (and the run to look at), or the inbox again with the refusal.
async fn answer_page(
    api: &Api,
    reader: Reader,
    credentials: &Credentials,
    done: Result<(String, Option<Uuid>), Error>,
) -> Result<Response, Error> {
    let csrf = forms(api, credentials);
    let viewer = viewer(api, reader, csrf.as_deref());
    let waits = api.store().waits(None, SHOWN).await?;
    match done {
        Ok((said, run)) => Ok(Html(page(&waits, viewer, Some(Said::Done(said, run))).into_string()).into_response()),
        Err(e) => {
            let status = e.status;
            Ok((status, Html(page(&waits, viewer, Some(Said::Refused(e))).into_string())).into_response())
        }
    }
}

/// What the page says above the table after a form.
enum Said {
    Done(String, Option<Uuid>),
    Refused(Error),
}

fn page(waits: &[WaitView], viewer: Viewer<'_>, said: Option<Said>) -> Markup {
    let body = html! {
        h1 { "Waiting steps" }
        @match said {
            Some(Said::Done(text, run)) => div.panel #done {
                (text)
                @if let Some(run) = run { " " a href={ "/runs/" (run) } { "Open the run →" } }
            },
            Some(Said::Refused(e)) => div.panel #refused {
                strong { "Refused: " } (e.body.message)
                @if let Some(field) = &e.body.field { " " span.muted { "(field " code { (field) } ")" } }
            },
            None => {},
        }
        p.muted { "Every step waiting for a timer, a signal or an event, the oldest first (at most " (SHOWN) ")." }
        div #waits { (table(waits, viewer, chrono::Utc::now())) }
        @if viewer.csrf.is_none() { p.muted { (pages::read_only(viewer.updates)) } }
        @if !viewer.live() { p.muted #static-page { (pages::RELOAD) } }
    };
    pages::layout("Waiting steps", body, pages::live_script(viewer, pages::WAITS_LIVE))
}

/// The inbox's table (what `/fragments/waits` answers when something changes).
fn table(waits: &[WaitView], viewer: Viewer<'_>, now: chrono::DateTime<chrono::Utc>) -> Markup {
    html! {
        table {
            thead { tr { th { "run" } th { "step" } th { "waits for" } th { "since" } th { "" } } }
            tbody {
                @for w in waits {
                    tr.wait data-step=(w.step) data-run=(w.run_id) data-kind=(w.kind) {
                        td { a href={ "/runs/" (w.run_id) } { (w.run_name) } br; code.muted { (w.run_id) } }
                        td { (w.step) }
                        td { (w.describe(now)) }
                        td { (pages::time(w.started_at)) }
                        td { (form(w, viewer.csrf)) }
                    }
                }
                @if waits.is_empty() { tr { td colspan="5" .muted { "nothing waits" } } }
            }
        }
    }
}

/// A wait's form, for a reader who may act and a wait nothing decided yet.
fn form(w: &WaitView, csrf: Option<&str>) -> Markup {
    let Some(csrf) = csrf else { return html! {} };
    if w.decided_by.is_some() {
        return html! { span.muted { "decided; applied when the run is resumed" } };
    }
    let id = Uuid::new_v4();
    let required = w.schema.as_ref().and_then(|s| s.get("required")).map(|r| r.to_string());
    match (w.kind.as_str(), &w.name) {
        ("signal", Some(name)) => html! {
            form.inline.approve method="post" action="/waits/signal" data-confirm={ "Approve " (w.step) "?" } {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="run" value=(w.run_id);
                input type="hidden" name="name" value=(name);
                input type="hidden" name="id" value=(id);
                input type="hidden" name="decision" value="approve";
                textarea name="data" rows="2" cols="36" placeholder="{} (JSON payload)" {}
                @if let Some(required) = required { br; span.muted { "required: " code { (required) } } }
                br; button.approve type="submit" data-step=(w.step) { "Approve" }
            }
            " "
            form.inline.reject method="post" action="/waits/signal" data-confirm={ "Reject " (w.step) "? It fails and its dependents are skipped." } {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="run" value=(w.run_id);
                input type="hidden" name="name" value=(name);
                input type="hidden" name="id" value=(id);
                input type="hidden" name="decision" value="reject";
                input name="reason" placeholder="reason";
                " " button.reject type="submit" data-step=(w.step) { "Reject" }
            }
        },
        ("event", Some(name)) => html! {
            form.inline.event method="post" action="/waits/event" data-confirm={ "Send the event " (name) "? It completes every step waiting for this name and key." } {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="name" value=(name);
                input type="hidden" name="key" value=(w.key.clone().unwrap_or_default());
                input type="hidden" name="id" value=(id);
                textarea name="payload" rows="2" cols="36" placeholder="{} (JSON payload)" {}
                br; button.send-event type="submit" data-step=(w.step) { "Send event" }
            }
        },
        _ => html! { span.muted { "completes on its own" } },
    }
}
