//! What an operator page says after one of its forms: what the action changed, or the refusal
//! (with the field it names), above the page shown again. A refusal keeps its status code.

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use maud::{Markup, html};

use crate::Error;

/// What a form did.
#[derive(Debug)]
pub enum Said {
    /// What changed, and where to look (a path) if anywhere.
    Done(String, Option<String>),
    Refused(Error),
}

impl Said {
    /// What the action's result says.
    pub fn of(result: Result<(String, Option<String>), Error>) -> Said {
        match result {
            Ok((text, link)) => Said::Done(text, link),
            Err(e) => Said::Refused(e),
        }
    }

    /// The page with this said above it, under the refusal's status when refused.
    pub fn respond(&self, page: Markup) -> Response {
        let status = match self {
            Said::Done(..) => StatusCode::OK,
            Said::Refused(e) => e.status,
        };
        (status, Html(page.into_string())).into_response()
    }
}

/// The panel that says it (`#done` or `#refused`).
pub fn panel(said: Option<&Said>) -> Markup {
    html! {
        @match said {
            Some(Said::Done(text, link)) => div.panel #done role="status" {
                (text) @if let Some(link) = link { " " a href=(link) { "Open →" } }
            },
            Some(Said::Refused(e)) => div.panel #refused role="alert" {
                strong { "Refused: " } (e.body.message)
                @if let Some(field) = &e.body.field { " " span.muted { "(field " code { (field) } ")" } }
            },
            None => {},
        }
    }
}
