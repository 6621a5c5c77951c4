//! The runs list's search: status, workflow name, a creation time range, an error code, a
//! workflow at a version and input fields ([`crate::filters`]), each a parameter of the URL
//! (`/?status=failed&name=demo&from=2026-12-06T10:00&error=E_BROKEN&where=inputs.tenant=acme`),
//! so a search is a link; paged by the store's cursor, and the bulk actions act on the same
//! search. Times are UTC, as RFC 3339 or as a browser's `datetime-local` field sends them.

use chrono::{DateTime, NaiveDateTime, Utc};
use rara_domain::state::RunStatus;
use serde::Deserialize;

use maud::{Markup, html};

use super::overview;
use crate::Error;
use crate::filters::encode;
use crate::runs::ListQuery;

/// The runs list's query, as a browser sends it (an empty field is no filter).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ConsoleQuery {
    /// Refused: the token no longer goes in a URL (the login URL starts a session).
    pub token: Option<String>,
    pub status: Option<String>,
    pub name: Option<String>,
    /// Created at or after (UTC).
    pub from: Option<String>,
    /// Created before (UTC).
    pub to: Option<String>,
    /// An error code a step of the run ended with.
    pub error: Option<String>,
    /// `NAME` or `NAME@VERSION`.
    pub workflow: Option<String>,
    /// `inputs.PATH=VALUE` conditions: the URL's `where` parameters, taken apart
    /// ([`crate::filters::Searched`]).
    #[serde(skip)]
    pub wheres: Vec<String>,
    pub cursor: Option<String>,
    /// The overview's window (the landing page only).
    pub window: Option<overview::Span>,
}

fn nonempty(v: &Option<String>) -> Option<String> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned)
}

/// An instant of the form, RFC 3339 or a `datetime-local` value read as UTC.
fn instant(text: &str, field: &str) -> Result<DateTime<Utc>, Error> {
    if text.len() > 40 {
        return Err(Error::bad_request("a time is at most 40 characters").with_field(field));
    }
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .or_else(|_| NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S").map(|t| t.and_utc()))
        .or_else(|_| NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M").map(|t| t.and_utc()))
        .map_err(|_| {
            Error::bad_request(format!("{field} is a time: 2026-12-06T10:00 (UTC) or RFC 3339")).with_field(field)
        })
}

impl ConsoleQuery {
    /// No filter and no page: the landing page, with the overview.
    pub fn is_landing(&self) -> bool {
        let fields = [&self.status, &self.name, &self.from, &self.to, &self.error, &self.workflow, &self.cursor];
        fields.iter().all(|v| nonempty(v).is_none()) && self.wheres.iter().all(|w| w.trim().is_empty())
    }

    /// The search as the API's list takes it.
    pub(super) fn list(&self) -> Result<ListQuery, Error> {
        let status = match nonempty(&self.status) {
            Some(s) => Some(
                serde_json::from_value::<RunStatus>(serde_json::Value::String(s))
                    .map_err(|_| Error::bad_request("unknown run status").with_field("status"))?,
            ),
            None => None,
        };
        let at = |v: &Option<String>, field| nonempty(v).map(|t| instant(&t, field)).transpose();
        Ok(ListQuery {
            status,
            name: nonempty(&self.name),
            created_after: at(&self.from, "from")?,
            created_before: at(&self.to, "to")?,
            error: nonempty(&self.error),
            workflow: nonempty(&self.workflow),
            wheres: self.wheres.clone(),
            cursor: nonempty(&self.cursor),
            ..ListQuery::default()
        })
    }

    /// The search's filters as `(parameter, value)`, each `where` on its own, empty ones left out.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let fields = [
            ("status", &self.status),
            ("name", &self.name),
            ("from", &self.from),
            ("to", &self.to),
            ("error", &self.error),
            ("workflow", &self.workflow),
        ];
        let wheres = self.wheres.iter().map(|w| w.trim()).filter(|w| !w.is_empty()).map(|w| ("where", w.to_owned()));
        fields.into_iter().filter_map(|(k, v)| nonempty(v).map(|v| (k, v))).chain(wheres).collect()
    }

    /// The search's parameters for a link (the next page's), without the cursor.
    pub fn params(&self) -> String {
        self.pairs().iter().map(|(k, v)| format!("&{k}={}", encode(v))).collect()
    }

    /// The search as a form's hidden fields (the bulk actions', their confirmation's).
    pub fn hidden(&self) -> Markup {
        html! { @for (k, v) in self.pairs() { input type="hidden" name=(k) value=(v); } }
    }
}

/// The confirmation of a bulk `action` on the search `query`: how many it matched, and the
/// button that does it.
pub fn confirm_bulk(csrf: &str, action: &str, query: &ConsoleQuery, matched: usize) -> Markup {
    let what = if action == "cancel" { "running runs to cancel" } else { "failed or cancelled steps to retry" };
    let body = html! {
        h1 { "Confirm" }
        p #matched { (matched) " " (what) " match this filter." }
        form method="post" action="/bulk" {
            input type="hidden" name="csrf" value=(csrf);
            input type="hidden" name="action" value=(action);
            (query.hidden())
            input type="hidden" name="confirmed" value="yes";
            button #confirm type="submit" disabled[matched == 0] { "Yes, " (action) " " (matched) }
            " " a href="/" { "No, go back" }
        }
    };
    super::pages::layout("Confirm", body, None)
}
