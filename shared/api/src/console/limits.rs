//! The limits page (`/limits`): every concurrency key and group with its limit, rate, held and
//! queued steps and whether a pause covers it; every pause; and for a reader who may act, forms
//! that set or unset a key's limit and rate and pause or resume a run, a key (or group) or an
//! operation. Each form asks first, carries the CSRF token, calls the store's flow control as
//! `rara limits` and `rara pause` do, and answers with the page again and what it changed.

use axum::extract::rejection::FormRejection;
use axum::extract::{Form, State};
use axum::response::{Html, Response};
use axum::routing::{get, post};
use maud::{Markup, html};
use rara_domain::flow::{Rate, check_key};
use rara_store::flow::{KeyState, Pause, PauseTarget};
use serde::Deserialize;

use super::answer::{Said, panel};
use super::pages::{self, Viewer};
use super::{forms, viewer};
use crate::auth::Credentials;
use crate::{Api, Error, Reader};

pub(super) fn routes() -> axum::Router<Api> {
    axum::Router::new().route("/limits", get(limits_page)).route("/limits/action", post(action_form))
}

async fn limits_page(State(api): State<Api>, reader: Reader, credentials: Credentials) -> Result<Html<String>, Error> {
    let csrf = forms(&api, &credentials);
    let (keys, pauses) = (api.store().limits().await?, api.store().pauses().await?);
    Ok(Html(page(&keys, &pauses, viewer(&api, reader, csrf.as_deref()), None).into_string()))
}

/// A form of the page: `set` (target, limit and/or rate), `unset` (target), `pause` and
/// `resume` (kind: run, key or operation; target).
#[derive(Debug, Clone, Deserialize)]
pub struct LimitForm {
    pub csrf: String,
    pub action: String,
    pub target: String,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub limit: Option<String>,
    #[serde(default)]
    pub rate: Option<String>,
}

async fn action_form(
    State(api): State<Api>,
    reader: Reader,
    credentials: Credentials,
    form: Result<Form<LimitForm>, FormRejection>,
) -> Result<Response, Error> {
    let Form(form) = form?;
    api.auth().check_form(&credentials.headers, credentials.caller.as_ref(), &form.csrf)?;
    let said = Said::of(act(&api, &form).await);
    let csrf = forms(&api, &credentials);
    let (keys, pauses) = (api.store().limits().await?, api.store().pauses().await?);
    Ok(said.respond(page(&keys, &pauses, viewer(&api, reader, csrf.as_deref()), Some(&said))))
}

/// A key, or a group of keys: a prefix ending in `*` (`tenant-*`), as `rara limits` takes it.
fn key_or_group(text: &str) -> Result<String, Error> {
    let checked = match text.strip_suffix('*') {
        Some("") => Err("a group needs a prefix before its '*' (`tenant-*`)".to_owned()),
        Some(prefix) => check_key(prefix),
        None => check_key(text),
    };
    checked.map(|()| text.to_owned()).map_err(|e| Error::bad_request(e).with_field("target"))
}

/// A form field that may be empty.
fn given(field: &Option<String>) -> Option<&str> {
    field.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

async fn act(api: &Api, form: &LimitForm) -> Result<(String, Option<String>), Error> {
    let store = api.store();
    let target = form.target.trim();
    let before = |keys: &[KeyState]| keys.iter().find(|k| k.name == target).map(describe);
    match form.action.as_str() {
        "set" => {
            let target = key_or_group(target)?;
            let limit = given(&form.limit)
                .map(|l| {
                    l.parse::<u32>().map_err(|_| Error::bad_request("a limit is a whole number").with_field("limit"))
                })
                .transpose()?;
            let rate = given(&form.rate)
                .map(|r| r.parse::<Rate>().map_err(|e| Error::bad_request(e).with_field("rate")))
                .transpose()?;
            if limit.is_none() && rate.is_none() {
                return Err(Error::bad_request("give a limit, a rate or both").with_field("limit"));
            }
            let was = before(&store.limits().await?).unwrap_or_else(|| "no limit".into());
            store.set_limit(&target, limit, rate).await?;
            let now = before(&store.limits().await?).unwrap_or_default();
            Ok((format!("{target}: was {was}, now {now}."), None))
        }
        "unset" => {
            let target = key_or_group(target)?;
            let was = before(&store.limits().await?).unwrap_or_else(|| "no limit".into());
            let removed = store.unset_limit(&target).await?;
            let said =
                if removed { format!("{target}: was {was}, now no limit.") } else { format!("{target} had no limit.") };
            Ok((said, None))
        }
        "pause" | "resume" => {
            let what = match form.kind.as_deref().unwrap_or_default() {
                "run" => PauseTarget::Run(
                    target.parse().map_err(|_| Error::bad_request("a run is its id").with_field("target"))?,
                ),
                "key" => PauseTarget::Key(key_or_group(target)?),
                "operation" if !target.is_empty() && target.len() <= 200 => PauseTarget::Operation(target.to_owned()),
                "operation" => return Err(Error::bad_request("an operation's name").with_field("target")),
                _ => return Err(Error::bad_request("a pause is of a run, a key or an operation").with_field("kind")),
            };
            let kind = form.kind.clone().unwrap_or_default();
            let said = if form.action == "pause" {
                match store.pause(&what).await? {
                    true => format!("Paused {kind} {target}: nothing of it is leased until it is resumed."),
                    false => format!("The {kind} {target} was paused already: nothing changed."),
                }
            } else {
                match store.resume(&what).await? {
                    true => format!("Resumed {kind} {target}: its due steps are leased again."),
                    false => format!("The {kind} {target} was not paused: nothing changed."),
                }
            };
            let link = matches!(what, PauseTarget::Run(_)).then(|| format!("/runs/{target}"));
            Ok((said, link))
        }
        _ => Err(Error::bad_request("the action is set, unset, pause or resume").with_field("action")),
    }
}

/// A key's limit and rate as the answer says them.
fn describe(k: &KeyState) -> String {
    let limit = k.limit.map_or("no limit".to_owned(), |n| format!("limit {n}"));
    let rate = k.rate.as_ref().map(|r| format!(", rate {r}")).unwrap_or_default();
    format!("{limit}{rate}")
}

fn page(keys: &[KeyState], pauses: &[Pause], viewer: Viewer<'_>, said: Option<&Said>) -> Markup {
    let csrf = viewer.csrf;
    let body = html! {
        h1 { "Limits and pauses" }
        (panel(said))
        h2 { "Keys and groups" }
        table #keys {
            thead { tr { th { "key or group" } th { "limit" } th { "rate" } th { "held" } th { "queued" } th { "paused" } th { "" } } }
            tbody {
                @for k in keys {
                    tr.key data-name=(k.name) {
                        td { code { (k.name) } }
                        td { @if let Some(n) = k.limit { (n) } }
                        td { (k.rate.clone().unwrap_or_default()) }
                        td { (k.held) } td { (k.queued) }
                        td { @if k.paused { span.badge data-status="cancelled" { "paused" } } }
                        td { @if let (Some(csrf), true) = (csrf, k.limit.is_some() || k.rate.is_some()) {
                            (form(csrf, "unset", &k.name, None, &format!("Remove the limit and rate of {}?", k.name)))
                        } }
                    }
                }
                @if keys.is_empty() { tr { td colspan="7" .muted { "no key with a limit, a step or a pause" } } }
            }
        }
        h2 { "Pauses" }
        table #pauses {
            thead { tr { th { "kind" } th { "target" } th { "since" } th { "" } } }
            tbody {
                @for p in pauses {
                    tr.pause data-kind=(p.kind) data-target=(p.target) {
                        td { (p.kind) } td { code { (p.target) } } td { (pages::time(p.paused_at)) }
                        td { @if let Some(csrf) = csrf {
                            (form(csrf, "resume", &p.target, Some(&p.kind), &format!("Resume {} {}?", p.kind, p.target)))
                        } }
                    }
                }
                @if pauses.is_empty() { tr { td colspan="4" .muted { "nothing is paused" } } }
            }
        }
        @if let Some(csrf) = csrf { (editors(csrf)) } @else { p.muted { (pages::read_only(viewer.updates)) } }
    };
    pages::layout("Limits", body, None)
}

/// A one-button form for a row.
fn form(csrf: &str, action: &str, target: &str, kind: Option<&str>, ask: &str) -> Markup {
    html! {
        form.inline method="post" action="/limits/action" data-confirm=(ask) {
            input type="hidden" name="csrf" value=(csrf);
            input type="hidden" name="action" value=(action);
            input type="hidden" name="target" value=(target);
            @if let Some(kind) = kind { input type="hidden" name="kind" value=(kind); }
            button type="submit" class=(action) data-target=(target) { (action) }
        }
    }
}

/// The forms that set a limit and pause something.
fn editors(csrf: &str) -> Markup {
    html! {
        div.panel {
            form #set-limit method="post" action="/limits/action" data-confirm="Set this limit?" {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="action" value="set";
                label { "key or group " input name="target" required placeholder="tenant-a or tenant-*"; } " "
                label { "limit " input name="limit" inputmode="numeric" size="6" placeholder="10"; } " "
                label { "rate " input name="rate" size="8" placeholder="50/s"; } " "
                button type="submit" { "Set limit" }
            }
        }
        div.panel {
            form #pause method="post" action="/limits/action" data-confirm="Pause it? Nothing of it is leased until it is resumed." {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="action" value="pause";
                label { "pause a " select name="kind" {
                    option value="key" { "key or group" } option value="operation" { "operation" } option value="run" { "run" }
                } } " "
                label { "named " input name="target" required placeholder="tenant-a, http.request or a run id"; } " "
                button type="submit" { "Pause" }
            }
        }
    }
}
