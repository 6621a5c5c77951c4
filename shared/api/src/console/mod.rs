//! The console: server-rendered HTML (maud), readable without JavaScript. With
//! [`Updates::Live`] and an authenticated reader a few lines of inline script subscribe to the
//! SSE stream of a page and swap in the fragment the server renders when a run changes; an
//! anonymous reader gets the static page, and its event routes answer `401` (a stream registers
//! a console listener and turns the hot tables' triggers on: no anonymous request changes the
//! database). With [`Updates::Static`] (the `api` Lambda) pages have no such script and the
//! event routes answer `204` at once. Forms (cancel, retry, bulk actions with a confirmation)
//! carry the CSRF token and need the session of `rara ui`'s login URL, or an operator under IAM
//! ([`crate::auth`]).
//!
//! - this file: the routes and their handlers;
//! - [`pages`]: the markup of the pages and of the live fragments;
//! - [`dag`], [`timeline`]: the run page's two drawings; [`step`]: its selected step's panel;
//! - [`actions`]: a run's and a step's forms (cancel, retry, rerun from a step);
//! - [`inbox`]: the waiting steps across runs (`/waits`), each with its form;
//! - [`overview`]: the landing page's state, charts and tables above the runs list;
//! - [`schedules`], [`limits`], [`dlq`]: the operator pages, their forms answered through [`answer`];
//! - [`search`]: the runs list's filters, each a parameter of the URL.

pub mod actions;
pub mod answer;
pub mod dag;
pub mod dlq;
pub mod inbox;
pub mod limits;
pub mod overview;
pub mod pages;
pub mod schedules;
pub mod search;
pub mod step;
pub mod timeline;

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::rejection::{FormRejection, PathRejection, QueryRejection};
use axum::extract::{Form, Path, Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use futures::Stream;
use rara_domain::state::AttemptOutcome;
use serde::Deserialize;
use tokio::sync::broadcast;
use uuid::Uuid;

use crate::auth::Credentials;
use crate::filters::{self, Searched};
use crate::runs::Bulk;
use crate::{Api, Error, Reader, Updates, live};
use pages::Viewer;
pub use search::ConsoleQuery;

/// How long a page's stream gathers notifications before it renders once: a batch of steps
/// finishing together is one update.
const SETTLE: Duration = Duration::from_millis(100);

pub(crate) fn routes() -> axum::Router<Api> {
    axum::Router::new()
        .route("/", get(runs_page))
        .route("/fragments/runs", get(runs_fragment))
        .route("/events", get(runs_events))
        .route("/runs/{id}", get(run_page))
        .route("/runs/{id}/fragment", get(run_fragment))
        .route("/runs/{id}/events", get(run_events))
        .route("/bulk", post(bulk_form))
        .merge(actions::routes())
        .merge(inbox::routes())
        .merge(overview::routes())
        .merge(schedules::routes())
        .merge(limits::routes())
        .merge(dlq::routes())
}

/// HTML-escapes text for the hand-written SVG (maud escapes everything else).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\r' => out.push_str("&#13;"),
            c => out.push(c),
        }
    }
    out
}

/// The colour of a step status or an attempt outcome, dark enough for white text (WCAG AA).
pub fn status_colour(status: &str) -> &'static str {
    match status {
        "succeeded" => "#15803d",
        "failed" | "lease_expired" => "#dc2626",
        "cancelled" => "#b45309",
        "retrying" => "#c2410c",
        "running" => "#2563eb",
        "leased" => "#0369a1",
        "skipped" => "#57534e",
        "waiting" => "#7c3aed",
        _ => "#475569",
    }
}

/// An attempt outcome as the store spells it.
pub fn outcome_name(outcome: AttemptOutcome) -> String {
    serde_json::to_value(outcome).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

async fn runs_page(
    State(api): State<Api>,
    reader: Reader,
    credentials: Credentials,
    query: Result<Searched<ConsoleQuery>, Error>,
) -> Result<Response, Error> {
    let query = searched(query?);
    if query.token.is_some() {
        return Err(Error::bad_request(
            "the token no longer goes in a URL: open the one-time login URL `rara ui` printed, or get one \
             with `POST /api/login` and the token",
        )
        .with_field("token"));
    }
    let page = query.list()?.page(&api).await?;
    let csrf = forms(&api, &credentials);
    let landing = query.is_landing();
    let span = query.window.unwrap_or_default();
    let overview = if landing { Some(overview::load(&api, chrono::Utc::now(), span).await?) } else { None };
    let viewer = viewer(&api, reader, csrf.as_deref());
    Ok(Html(pages::runs(&query, &page, viewer, overview.as_ref()).into_string()).into_response())
}

async fn runs_fragment(
    State(api): State<Api>,
    _: Reader,
    query: Result<Searched<ConsoleQuery>, Error>,
) -> Result<Html<String>, Error> {
    let query = searched(query?);
    let page = query.list()?.page(&api).await?;
    Ok(Html(pages::runs_table(&query, &page).into_string()))
}

/// The console's query with its `where` conditions in it.
fn searched(Searched { mut query, wheres }: Searched<ConsoleQuery>) -> ConsoleQuery {
    query.wheres = wheres;
    query
}

/// A run page's selection: `?step=NAME` opens that step's panel.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RunQuery {
    #[serde(default)]
    pub step: Option<String>,
}

impl RunQuery {
    /// The selected step's name, bounded (a name is no longer than [`step::MAX_NAME`]).
    fn selected(&self) -> Result<Option<&str>, Error> {
        match self.step.as_deref().filter(|s| !s.is_empty()) {
            Some(name) if name.len() > step::MAX_NAME => Err(Error::bad_request(format!(
                "a step name is at most {} bytes; this one has {}",
                step::MAX_NAME,
                name.len()
            ))
            .with_field("step")),
            selected => Ok(selected),
        }
    }
}

async fn run_page(
    State(api): State<Api>,
    reader: Reader,
    credentials: Credentials,
    id: Result<Path<Uuid>, PathRejection>,
    query: Result<Query<RunQuery>, QueryRejection>,
) -> Result<Html<String>, Error> {
    let (Path(id), Query(query)) = (id?, query?);
    let csrf = forms(&api, &credentials);
    let viewer = viewer(&api, reader, csrf.as_deref());
    let live = render_run(&api, id, viewer, query.selected()?).await?;
    let run = api.store().run_status(id).await?;
    Ok(Html(pages::run(id, run, live, viewer).into_string()))
}

async fn run_fragment(
    State(api): State<Api>,
    reader: Reader,
    credentials: Credentials,
    id: Result<Path<Uuid>, PathRejection>,
    query: Result<Query<RunQuery>, QueryRejection>,
) -> Result<Html<String>, Error> {
    let (Path(id), Query(query)) = (id?, query?);
    let csrf = forms(&api, &credentials);
    Ok(Html(render_run(&api, id, viewer(&api, reader, csrf.as_deref()), query.selected()?).await?))
}

/// The CSRF token of the forms, when this request may act (else the page is read-only).
fn forms(api: &Api, credentials: &Credentials) -> Option<String> {
    api.auth().may_act(&credentials.headers, credentials.caller.as_ref()).then(|| api.auth().csrf_token())
}

fn viewer<'a>(api: &Api, reader: Reader, csrf: Option<&'a str>) -> Viewer<'a> {
    Viewer { csrf, authenticated: reader.authenticated, updates: api.updates() }
}

/// The live part of a run page, with the panel of the step `selected`: what the SSE stream
/// sends when the run changes (without a selection: the page's script asks for the fragment
/// of its selection instead).
pub async fn render_run(api: &Api, id: Uuid, viewer: Viewer<'_>, selected: Option<&str>) -> Result<String, Error> {
    let run = api.store().run(id).await?;
    let inputs = api.store().step_inputs(id).await?;
    Ok(pages::run_live(&run, &inputs, viewer, chrono::Utc::now(), selected).into_string())
}

/// The refusal of a stream to an anonymous reader: a stream changes database state.
fn no_anonymous_stream() -> Error {
    Error::unauthenticated(
        "live updates are for a console session (a stream registers a listener in the database): open the \
         one-time login URL `rara ui` printed; without one, reload the page to see changes",
    )
}

/// Waits for a change that concerns `wanted` (any run when `None`), then lets the burst settle.
async fn next_change(changes: &mut broadcast::Receiver<Uuid>, wanted: Option<Uuid>) -> bool {
    loop {
        match changes.recv().await {
            Ok(run) if wanted.is_none() || Some(run) == wanted || run == live::RESYNC => break,
            Ok(_) => continue,
            Err(broadcast::error::RecvError::Lagged(_)) => break,
            Err(broadcast::error::RecvError::Closed) => return false,
        }
    }
    tokio::time::sleep(SETTLE).await;
    // Whatever arrived meanwhile is covered by the render that follows.
    while let Ok(_) | Err(broadcast::error::TryRecvError::Lagged(_)) = changes.try_recv() {}
    true
}

async fn run_events(
    State(api): State<Api>,
    reader: Reader,
    credentials: Credentials,
    id: Result<Path<Uuid>, PathRejection>,
) -> Result<Response, Error> {
    let Path(id) = id?;
    if api.updates() == Updates::Static {
        api.store().run_status(id).await?;
        return Ok(no_stream());
    }
    if !reader.authenticated {
        return Err(no_anonymous_stream());
    }
    api.store().run_status(id).await?;
    let csrf = forms(&api, &credentials);
    let changes = api.inner.live.subscribe().await;
    let stream = futures::stream::unfold((api, changes, csrf), move |(api, mut changes, csrf)| async move {
        loop {
            if !next_change(&mut changes, Some(id)).await {
                return None;
            }
            match render_run(&api, id, viewer(&api, reader, csrf.as_deref()), None).await {
                Ok(html) => return Some((Ok(Event::default().event("update").data(html)), (api, changes, csrf))),
                Err(e) => tracing::warn!(code = %e.body.code, "cannot render a run update"),
            }
        }
    });
    Ok(sse(stream))
}

async fn runs_events(State(api): State<Api>, reader: Reader) -> Result<Response, Error> {
    if api.updates() == Updates::Static {
        return Ok(no_stream());
    }
    if !reader.authenticated {
        return Err(no_anonymous_stream());
    }
    let changes = api.inner.live.subscribe().await;
    let stream = futures::stream::unfold(changes, |mut changes| async move {
        next_change(&mut changes, None).await.then(|| (Ok(Event::default().event("changed").data("runs")), changes))
    });
    Ok(sse(stream))
}

fn sse(stream: impl Stream<Item = Result<Event, Infallible>> + Send + 'static) -> Response {
    Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}

/// The answer of an event route when pages are [`Updates::Static`]: complete at once, nothing
/// subscribed, and `204`, on which an `EventSource` (a page rendered before) stops reconnecting.
fn no_stream() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

/// A bulk action from the runs list: first a confirmation page with the count, then the action.
/// The form's fields beside the search's ([`ConsoleQuery`]: its `where` fields repeat).
#[derive(Debug, Clone, Deserialize)]
pub struct BulkForm {
    pub csrf: String,
    /// `cancel` or `retry`.
    pub action: String,
    /// Set by the confirmation page.
    #[serde(default)]
    pub confirmed: Option<String>,
}

/// The form's own fields, taken from its pairs.
const BULK_FIELDS: [&str; 3] = ["csrf", "action", "confirmed"];

async fn bulk_form(
    State(api): State<Api>,
    credentials: Credentials,
    form: Result<Form<Vec<(String, String)>>, FormRejection>,
) -> Result<Response, Error> {
    let Form(pairs) = form?;
    let (own, search): (Vec<_>, Vec<_>) = pairs.into_iter().partition(|(k, _)| BULK_FIELDS.contains(&k.as_str()));
    let form: BulkForm = filters::split(own)?.query;
    api.auth().check_form(&credentials.headers, credentials.caller.as_ref(), &form.csrf)?;
    let query = searched(filters::split(search)?);
    let filter = query.list()?.filter()?;
    let action = match form.action.as_str() {
        "cancel" => Bulk::Cancel,
        "retry" => Bulk::Retry,
        _ => return Err(Error::bad_request("the action is cancel or retry").with_field("action")),
    };
    let confirmed = form.confirmed.as_deref() == Some("yes");
    let done = crate::runs::bulk(&api, action, &filter, !confirmed, None).await?;
    if confirmed {
        return Ok(Redirect::to("/").into_response());
    }
    let matched = done.matched as usize;
    let page = search::confirm_bulk(&form.csrf, &form.action, &query, matched);
    Ok((StatusCode::OK, Html(page.into_string())).into_response())
}
