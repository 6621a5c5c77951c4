//! A run's and a step's forms: cancel (with a reason), retry, and rerun from a step. Each
//! checks the CSRF token, calls what the API calls, and returns to the run page.

use axum::extract::rejection::{FormRejection, PathRejection};
use axum::extract::{Form, Path, State};
use axum::response::Redirect;
use axum::routing::post;
use serde::Deserialize;
use uuid::Uuid;

use crate::auth::Credentials;
use crate::{Api, Error};

pub(super) fn routes() -> axum::Router<Api> {
    axum::Router::new()
        .route("/runs/{id}/cancel", post(cancel_run_form))
        .route("/steps/{id}/cancel", post(cancel_step_form))
        .route("/steps/{id}/retry", post(retry_step_form))
        .route("/runs/{id}/rerun", post(rerun_form))
}

/// A console form: its CSRF token, and for a cancel the reason.
#[derive(Debug, Clone, Deserialize)]
pub struct ActionForm {
    pub csrf: String,
    #[serde(default)]
    pub reason: Option<String>,
    /// The run page to return to.
    #[serde(default)]
    pub back: Option<Uuid>,
}

fn back_to(run: Option<Uuid>) -> Redirect {
    match run {
        Some(run) => Redirect::to(&format!("/runs/{run}")),
        None => Redirect::to("/"),
    }
}

fn reason(form: &ActionForm) -> Option<String> {
    form.reason.clone().filter(|r| !r.trim().is_empty())
}

async fn cancel_run_form(
    State(api): State<Api>,
    credentials: Credentials,
    id: Result<Path<Uuid>, PathRejection>,
    form: Result<Form<ActionForm>, FormRejection>,
) -> Result<Redirect, Error> {
    let (Path(id), Form(form)) = (id?, form?);
    api.auth().check_form(&credentials.headers, credentials.caller.as_ref(), &form.csrf)?;
    crate::runs::cancel(&api, id, false, reason(&form)).await?;
    Ok(back_to(Some(id)))
}

async fn cancel_step_form(
    State(api): State<Api>,
    credentials: Credentials,
    id: Result<Path<Uuid>, PathRejection>,
    form: Result<Form<ActionForm>, FormRejection>,
) -> Result<Redirect, Error> {
    let (Path(id), Form(form)) = (id?, form?);
    api.auth().check_form(&credentials.headers, credentials.caller.as_ref(), &form.csrf)?;
    crate::runs::cancel(&api, id, true, reason(&form)).await?;
    Ok(back_to(form.back))
}

async fn retry_step_form(
    State(api): State<Api>,
    credentials: Credentials,
    id: Result<Path<Uuid>, PathRejection>,
    form: Result<Form<ActionForm>, FormRejection>,
) -> Result<Redirect, Error> {
    let (Path(id), Form(form)) = (id?, form?);
    api.auth().check_form(&credentials.headers, credentials.caller.as_ref(), &form.csrf)?;
    crate::runs::retry(&api, id).await?;
    Ok(back_to(form.back))
}

/// A rerun from a step of a finished run: the new run's page.
#[derive(Debug, Clone, Deserialize)]
pub struct RerunForm {
    pub csrf: String,
    pub from: String,
}

async fn rerun_form(
    State(api): State<Api>,
    credentials: Credentials,
    id: Result<Path<Uuid>, PathRejection>,
    form: Result<Form<RerunForm>, FormRejection>,
) -> Result<Redirect, Error> {
    let (Path(id), Form(form)) = (id?, form?);
    api.auth().check_form(&credentials.headers, credentials.caller.as_ref(), &form.csrf)?;
    let body =
        crate::rerun::RerunBody { from: form.from, inputs: serde_json::Map::new(), force: false, workflow: None };
    let made = crate::rerun::make(&api, id, body).await?;
    Ok(Redirect::to(&format!("/runs/{}", made.id)))
}
