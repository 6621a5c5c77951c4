//! The schedules page (`/schedules`): every schedule with its calendar, next fire, last run and
//! counts, and for a reader who may act a pause or resume and a trigger (one run now) per
//! schedule. Each form asks first, carries the CSRF token, calls what `rara schedule` and
//! `/api/schedules` call, and answers with the page again and what it changed.

use axum::extract::rejection::FormRejection;
use axum::extract::{Form, State};
use axum::response::{Html, Response};
use axum::routing::{get, post};
use maud::{Markup, html};
use rara_store::schedules::ScheduleView;
use serde::Deserialize;

use super::answer::{Said, panel};
use super::pages::{self, Viewer};
use super::{forms, viewer};
use crate::auth::Credentials;
use crate::{Api, Error, Reader};

/// At most this many schedules on the page (by name).
const SHOWN: u32 = 500;

pub(super) fn routes() -> axum::Router<Api> {
    axum::Router::new().route("/schedules", get(schedules_page)).route("/schedules/action", post(action_form))
}

async fn schedules_page(
    State(api): State<Api>,
    reader: Reader,
    credentials: Credentials,
) -> Result<Html<String>, Error> {
    let csrf = forms(&api, &credentials);
    let schedules = api.store().schedules(SHOWN).await?;
    Ok(Html(page(&schedules, viewer(&api, reader, csrf.as_deref()), None).into_string()))
}

/// A schedule's form: `pause`, `resume` or `trigger`.
#[derive(Debug, Clone, Deserialize)]
pub struct ActionForm {
    pub csrf: String,
    pub name: String,
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
    let said = Said::of(act(&api, &form).await);
    let csrf = forms(&api, &credentials);
    let schedules = api.store().schedules(SHOWN).await?;
    Ok(said.respond(page(&schedules, viewer(&api, reader, csrf.as_deref()), Some(&said))))
}

/// Does what the form asks; what changed, and the run to look at.
async fn act(api: &Api, form: &ActionForm) -> Result<(String, Option<String>), Error> {
    let store = api.store();
    let before = store.schedule(&form.name).await?;
    match form.action.as_str() {
        "pause" | "resume" => {
            let paused = form.action == "pause";
            store.set_schedule_paused(&form.name, paused).await?;
            let after = store.schedule(&form.name).await?;
            let was = if before.paused { "paused" } else { "active" };
            let now = if after.paused {
                "paused: its slots are decided at resume".to_owned()
            } else {
                format!("active, next fire {}", pages::time(after.next_fire_at))
            };
            Ok((format!("Schedule {} was {was}, is now {now}.", form.name), None))
        }
        "trigger" => {
            let in_process = crate::schedules::in_process(api);
            let fired = rara_operator::schedules::trigger(store, &api.inner.config, &in_process, &form.name)
                .await
                .map_err(crate::schedules::operator)?;
            let run = fired.runs.first().map(|r| format!("/runs/{r}"));
            let which = fired.runs.first().map(|r| format!(" run {r}")).unwrap_or_default();
            Ok((format!("Schedule {} triggered: {} new{which}.", form.name, fired.created), run))
        }
        _ => Err(Error::bad_request("the action is pause, resume or trigger").with_field("action")),
    }
}

fn page(schedules: &[ScheduleView], viewer: Viewer<'_>, said: Option<&Said>) -> Markup {
    let body = html! {
        h1 { "Schedules" }
        (panel(said))
        table #schedules {
            thead { tr {
                th { "name" } th { "workflow" } th { "when" } th { "state" } th { "next fire" }
                th { "last run" } th { "fired / skipped / missed / failed" } th { "" }
            } }
            tbody {
                @for s in schedules {
                    tr.schedule data-name=(s.name) data-paused=(s.paused) {
                        td { (s.name) }
                        td { code { (s.workflow_ref()) } }
                        td { (when(s)) }
                        td { @if s.paused { span.badge data-status="cancelled" { "paused" } } @else { "active" } }
                        td { (pages::time(s.next_fire_at)) }
                        td {
                            @if let Some(run) = s.last_run_id {
                                a href={ "/runs/" (run) } { code { (run.to_string()[..8]) } }
                                @if let Some(status) = s.last_run_status { " " (status.as_str()) }
                            }
                            @if let Some(e) = &s.last_error { br; span.muted { (e) } }
                        }
                        td { (s.slots_fired) " / " (s.slots_skipped) " / " (s.slots_missed) " / " (s.slots_failed) }
                        td { (actions(s, viewer.csrf)) }
                    }
                }
                @if schedules.is_empty() { tr { td colspan="8" .muted { "no schedule (rara schedule create)" } } }
            }
        }
        @if viewer.csrf.is_none() { p.muted { (pages::read_only(viewer.updates)) } }
    };
    pages::layout("Schedules", body, None)
}

/// The calendar as written: a cron expression in its time zone, or a period.
fn when(s: &ScheduleView) -> String {
    match (&s.spec.cron, s.spec.every_ms) {
        (Some(cron), _) => format!("cron {cron} ({})", s.spec.timezone),
        (None, Some(ms)) => {
            format!("every {}", rara_domain::human::duration(std::time::Duration::from_millis(ms.max(0) as u64)))
        }
        (None, None) => String::new(),
    }
}

fn actions(s: &ScheduleView, csrf: Option<&str>) -> Markup {
    let Some(csrf) = csrf else { return html! {} };
    let (toggle, ask) = if s.paused {
        ("resume", format!("Resume {}? Its slots within the catch-up window fire.", s.name))
    } else {
        ("pause", format!("Pause {}? No slot fires until it is resumed.", s.name))
    };
    html! {
        @for (action, ask) in [(toggle, ask), ("trigger", format!("Start one run of {} now?", s.name))] {
            form.inline method="post" action="/schedules/action" data-confirm=(ask) {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="name" value=(s.name);
                input type="hidden" name="action" value=(action);
                button type="submit" class=(action) data-name=(s.name) { (action) }
            }
            " "
        }
    }
}
