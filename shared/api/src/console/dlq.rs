//! The dead-letter queue page (`/dlq`): the first [`SHOWN`] entries, each classified (rejected
//! with rara's reason, stale, live, unknown) as `rara dlq list` shows them, and for a reader
//! who may act the two actions of `rara dlq`: purge the stale entries and redrive the live ones
//! and rara's own dead-letters. Each asks first, carries the CSRF token, calls the port
//! `rara_operator::dlq::DeadLetters` (the adapter the CLI uses too) and answers with the page
//! again and what it changed. Without a DLQ configured (`RARA_DLQ_URL` and `RARA_QUEUE_URL`, as
//! the CLI reads them) the page says so and no SQS client exists.

use axum::extract::rejection::FormRejection;
use axum::extract::{Form, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use maud::{Markup, html};
use rara_operator::dlq::{self, Entry, Purged, Redriven};
use serde::Deserialize;

use super::answer::{Said, panel};
use super::pages::{self, Viewer};
use super::{forms, viewer};
use crate::auth::Credentials;
use crate::{Api, Error, Reader};

/// At most this many entries are read for the page, and acted on by one form.
pub const SHOWN: u32 = 100;
/// The longest body shown of an entry (the rest is cut).
const BODY_SHOWN: usize = 200;

pub(super) fn routes() -> axum::Router<Api> {
    axum::Router::new().route("/dlq", get(dlq_page)).route("/dlq/action", post(action_form))
}

async fn dlq_page(State(api): State<Api>, reader: Reader, credentials: Credentials) -> Result<Response, Error> {
    let csrf = forms(&api, &credentials);
    render(&api, viewer(&api, reader, csrf.as_deref()), None).await
}

/// A form of the page: `purge` (the stale entries) or `redrive`.
#[derive(Debug, Clone, Deserialize)]
pub struct ActionForm {
    pub csrf: String,
    pub action: String,
}

async fn action_form(
    State(api): State<Api>,
    reader: Reader,
    credentials: Credentials,
    form: Result<Form<ActionForm>, FormRejection>,
) -> Result<Response, Error> {
    let Form(form) = form?;
    api.auth().check_form(&credentials.headers, credentials.caller.as_ref(), &form.csrf)?;
    let said = Said::of(act(&api, &form.action).await);
    let csrf = forms(&api, &credentials);
    render(&api, viewer(&api, reader, csrf.as_deref()), Some(&said)).await
}

async fn render(api: &Api, viewer: Viewer<'_>, said: Option<&Said>) -> Result<Response, Error> {
    // Reading receives the messages (their receive counts grow): an anonymous reader changes
    // nothing, so it is not shown them (nor their lease tokens).
    let entries = match api.dead_letters() {
        Some(dead) if viewer.authenticated => Some(dead.list(SHOWN).await.map_err(failed)?),
        _ => None,
    };
    let page = page(api.dead_letters().is_some(), entries.as_deref(), viewer, said);
    Ok(match said {
        Some(said) => said.respond(page),
        None => Html(page.into_string()).into_response(),
    })
}

/// Does what the form asks; what changed.
async fn act(api: &Api, action: &str) -> Result<(String, Option<String>), Error> {
    let dead = api.dead_letters().ok_or_else(not_configured)?;
    match action {
        "purge" => {
            let Purged { purged, kept } = dead.purge_stale(SHOWN).await.map_err(failed)?;
            Ok((format!("Removed {purged} stale message(s) from the DLQ; {kept} other(s) stay."), None))
        }
        "redrive" => {
            let done = dead.redrive(SHOWN).await.map_err(failed)?;
            Ok((redriven(&done), None))
        }
        _ => Err(Error::bad_request("the action is purge or redrive").with_field("action")),
    }
}

fn redriven(done: &Redriven) -> String {
    let Redriven { redriven, stale, unknown, rejected } = *done;
    let mut said = format!("Moved {redriven} message(s) back to the step queue.");
    if done.skipped() > 0 {
        said.push_str(&format!(
            " Left {} on the DLQ: {stale} stale, {unknown} for unknown steps, {rejected} not step messages.",
            done.skipped()
        ));
    }
    said
}

fn not_configured() -> Error {
    Error::new(
        StatusCode::CONFLICT,
        "not_configured",
        "no dead-letter queue is configured: start `rara ui` with RARA_DLQ_URL and RARA_QUEUE_URL",
        2,
    )
}

/// A queue or store failure: unavailable, try again (some entries may have moved: the page says
/// what is left).
fn failed(e: dlq::Error) -> Error {
    match e {
        dlq::Error::Store(e) => e.into(),
        dlq::Error::Unsent { unsent, done } => Error::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            format!("{} {unsent} message(s) could not be sent back; they stay on the DLQ.", redriven(&done)),
            1,
        ),
        dlq::Error::Queue(e) => {
            tracing::warn!(error = %e, "the dead-letter queue is unavailable");
            Error::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "the dead-letter queue is unavailable; try again",
                1,
            )
        }
    }
}

fn page(configured: bool, entries: Option<&[Entry]>, viewer: Viewer<'_>, said: Option<&Said>) -> Markup {
    let body = html! {
        h1 { "Dead-letter queue" }
        (panel(said))
        @match entries {
            None if configured => p #sign-in { "Reading the dead-letter queue receives its messages: open the login URL "
                code { "rara ui" } " printed to see them." },
            None => p #not-configured { "No dead-letter queue is configured: start " code { "rara ui" } " with "
                code { "RARA_DLQ_URL" } " and " code { "RARA_QUEUE_URL" } " (as " code { "rara dlq" } " reads them)." },
            Some(entries) => {
                p.muted { "The first " (SHOWN) " messages, each classified: " strong { "live" } " (its step still waits for it: \
                    redrive it), " strong { "stale" } " (its step moved on: purge it), " strong { "rejected" }
                    " (rara's own dead-letter, with its reason; a redrive sends it back), " strong { "unknown" } "." }
                (table(entries))
                @if let Some(csrf) = viewer.csrf {
                    (action(csrf, "purge", "Purge stale messages…", "Delete the stale messages from the DLQ (their steps moved on)?"))
                    " "
                    (action(csrf, "redrive", "Redrive…", "Send the live messages and rara's own dead-letters back to the step queue?"))
                } @else {
                    p.muted { (pages::read_only(viewer.updates)) }
                }
            }
        }
    };
    pages::layout("Dead-letter queue", body, None)
}

fn table(entries: &[Entry]) -> Markup {
    html! {
        table #dead-letters {
            thead { tr { th { "message" } th { "state" } th { "receives" } th { "classification" } th { "body" } } }
            tbody {
                @for e in entries {
                    tr.entry data-message=(e.message_id) data-state=(e.state.as_str()) {
                        td { code { (e.message_id) } }
                        td { (pages::badge(e.state.as_str())) }
                        td { (e.receive_count) }
                        td { (e.classification) }
                        td { code { (cut(&e.body)) } }
                    }
                }
                @if entries.is_empty() { tr { td colspan="5" .muted { "the dead-letter queue is empty" } } }
            }
        }
    }
}

fn action(csrf: &str, action: &str, label: &str, confirm: &str) -> Markup {
    html! {
        form.inline method="post" action="/dlq/action" data-confirm=(confirm) {
            input type="hidden" name="csrf" value=(csrf);
            input type="hidden" name="action" value=(action);
            button type="submit" class=(action) { (label) }
        }
    }
}

fn cut(body: &str) -> String {
    if body.chars().count() <= BODY_SHOWN {
        return body.to_owned();
    }
    body.chars().take(BODY_SHOWN - 1).chain(std::iter::once('…')).collect()
}
