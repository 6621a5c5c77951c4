//! Durable waits over HTTP (docs/src/guide/waits.md): signals to a run, events, completion
//! tokens, and what waits. A signal and an event need the token; a completion token is its own
//! credential (single use, ends with its wait) and is shown only to authenticated readers.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use rara_domain::wait::{MAX_KEY_LEN, check_delivery, key_text, valid_wait_name};
use rara_store::waits::{Delivery, Signal, TokenCompletion, WaitView};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::body::{ObjectBody, optional_object};
use crate::{Api, Error, ErrorBody, Reader, auth::Credentials};

/// The exit code of a completion nothing waits for (`rara signal`, as `rara exit-codes` lists it).
pub const NOT_WAITING_EXIT: u8 = 9;

pub(crate) fn routes() -> axum::Router<Api> {
    axum::Router::new()
        .route("/api/runs/{id}/signals/{name}", post(signal))
        .route("/api/events", post(event))
        .route("/api/waits", get(waits))
        .route("/api/waits/{token}", post(complete))
}

/// A signal to a run.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SignalRequest {
    /// The payload: the waiting step's output (default `{}`), checked against its wait's schema.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub data: Option<serde_json::Value>,
    /// An idempotency id: the same id twice is one delivery (default: a new one).
    #[serde(default)]
    pub id: Option<String>,
    /// Reject instead: the waiting step fails with `SIGNAL_REJECTED` and this reason.
    #[serde(default)]
    pub reject: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SignalResponse {
    /// `delivered`, `kept` (for a step that accepts it early) or `duplicate` (this id was received).
    pub delivery: String,
    /// The signal's id.
    pub id: String,
    /// The steps it completed (or is kept for).
    pub steps: Vec<String>,
    /// The run is paused: the completion is applied once it is resumed.
    pub paused: bool,
}

/// An event: it completes every step waiting for its name and key.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EventRequest {
    pub name: String,
    #[schema(value_type = String)]
    pub key: serde_json::Value,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub payload: Option<serde_json::Value>,
    /// An idempotency id: the same name and id twice is one event (default: a new one).
    #[serde(default)]
    pub id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EventResponse {
    pub id: String,
    /// `false`: an event of this name and id was received already; nothing changed.
    pub fresh: bool,
    /// Waits it completed.
    pub completed: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CompletionResponse {
    pub run_id: Uuid,
    pub step: String,
    pub paused: bool,
}

/// Whose waits to list.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct WaitsQuery {
    /// Only this run's (default: every run's, the oldest first).
    pub run: Option<Uuid>,
    /// At most this many, 1 to 500 (default 100).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
}

/// The id given (or a new one), bounded with the reason and the payload (`payload_field`: where
/// the request carries it).
fn checked(
    id: Option<String>,
    reject: Option<&str>,
    payload: &serde_json::Value,
    payload_field: &str,
) -> Result<String, Error> {
    let id = id.unwrap_or_else(|| Uuid::new_v4().to_string());
    check_delivery(&id, reject, payload).map_err(|(field, why)| {
        Error::bad_request(why).with_field(if field == "data" { payload_field } else { field })
    })?;
    Ok(id)
}

fn invalid_payload(problems: Vec<(String, String)>, field: &str) -> Error {
    let (path, _) = problems.first().cloned().unwrap_or_default();
    let message = problems.iter().map(|(p, why)| format!("{field}{p}: {why}")).collect::<Vec<_>>().join("\n");
    Error::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_payload", message, 2).with_field(format!("{field}{path}"))
}

/// Delivers a signal to a run.
pub(crate) async fn deliver(
    api: &Api,
    run_id: Uuid,
    name: &str,
    request: SignalRequest,
) -> Result<SignalResponse, Error> {
    if !valid_wait_name(name) {
        return Err(
            Error::bad_request("a signal name is 1 to 128 ASCII letters, digits and . _ : -").with_field("name")
        );
    }
    api.store().run_status(run_id).await?;
    let payload = request.data.unwrap_or_else(|| serde_json::json!({}));
    let id = checked(request.id, request.reject.as_deref(), &payload, "data")?;
    let signal = Signal { id: id.clone(), payload, reject: request.reject };
    let (delivery, steps, paused) = match api.store().signal(run_id, name, &signal).await? {
        Delivery::Delivered { steps, paused } => ("delivered", steps, paused),
        Delivery::Kept { steps } => ("kept", steps, false),
        Delivery::Duplicate => ("duplicate", Vec::new(), false),
        Delivery::NotWaiting(why) => {
            return Err(Error::new(StatusCode::CONFLICT, "not_waiting", why, NOT_WAITING_EXIT));
        }
        Delivery::Invalid(problems) => return Err(invalid_payload(problems, "data")),
    };
    Ok(SignalResponse { delivery: delivery.to_owned(), id, steps, paused })
}

/// Signal a run: completes the steps waiting for the signal `name`.
#[utoipa::path(post, path = "/api/runs/{id}/signals/{name}",
    params(("id" = Uuid, Path, description = "the run id"), ("name" = String, Path, description = "the signal")),
    request_body(content = SignalRequest, description = "optional"), security(("token" = [])),
    responses((status = 200, body = SignalResponse),
              (status = 409, body = ErrorBody, description = "no step waits for this signal now"),
              (status = 422, body = ErrorBody, description = "the payload fails the wait's schema"),
              (status = "4XX", body = ErrorBody)))]
pub async fn signal(
    State(api): State<Api>,
    credentials: Credentials,
    path: Result<Path<(Uuid, String)>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<SignalResponse>, Error> {
    api.auth().check_request(&credentials)?;
    let Path((run_id, name)) = path?;
    let request = optional_object::<SignalRequest>(&body?)?;
    Ok(Json(deliver(&api, run_id, &name, request).await?))
}

/// Receives an event.
pub(crate) async fn receive(api: &Api, request: EventRequest) -> Result<EventResponse, Error> {
    if !valid_wait_name(&request.name) {
        return Err(
            Error::bad_request("an event name is 1 to 128 ASCII letters, digits and . _ : -").with_field("name")
        );
    }
    let mut problem = None;
    let key = key_text(&request.key, "key", &mut |_, why| problem = Some(why)).ok_or_else(|| {
        Error::bad_request(problem.unwrap_or_else(|| format!("1 to {MAX_KEY_LEN} characters"))).with_field("key")
    })?;
    let payload = request.payload.unwrap_or_else(|| serde_json::json!({}));
    let id = checked(request.id, None, &payload, "payload")?;
    let receipt = api.store().send_event(&request.name, &key, &id, &payload).await?;
    Ok(EventResponse { id, fresh: receipt.fresh, completed: receipt.completed })
}

/// Send an event: completes every step waiting for its name and key, and is kept for the waits
/// that begin later in runs created before it.
#[utoipa::path(post, path = "/api/events", request_body = EventRequest, security(("token" = [])),
    responses((status = 200, body = EventResponse), (status = "4XX", body = ErrorBody)))]
pub async fn event(
    State(api): State<Api>,
    credentials: Credentials,
    body: Result<ObjectBody<EventRequest>, Error>,
) -> Result<Json<EventResponse>, Error> {
    api.auth().check_request(&credentials)?;
    Ok(Json(receive(&api, body?.0).await?))
}

/// Complete a wait with its completion token: the body (any JSON, default `{}`) is the step's
/// output. No API token: the completion token is the credential, good once.
#[utoipa::path(post, path = "/api/waits/{token}", params(("token" = String, Path, description = "the completion token")),
    request_body(content = Object, description = "the payload (optional)"), security(()),
    responses((status = 200, body = CompletionResponse),
              (status = 404, body = ErrorBody, description = "no such token, or it was used"),
              (status = "4XX", body = ErrorBody)))]
pub async fn complete(
    State(api): State<Api>,
    token: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<CompletionResponse>, Error> {
    let Path(token) = token?;
    let gone = || Error::not_found("no wait has this completion token (wrong, used, or its wait ended)");
    if token.len() > 128 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(gone());
    }
    let body = body?;
    let payload = crate::body::payload(&body)?;
    rara_domain::wait::check_payload(&payload).map_err(Error::bad_request)?;
    match api.store().complete_by_token(&token, &payload).await? {
        None => Err(gone()),
        Some(TokenCompletion::Invalid(problems)) => Err(invalid_payload(problems, "")),
        Some(TokenCompletion::Completed { run_id, step, paused }) => {
            Ok(Json(CompletionResponse { run_id, step, paused }))
        }
    }
}

/// The waits under way (an inbox): what each waits for, until when; with the token or a
/// session, each one's completion token.
#[utoipa::path(get, path = "/api/waits", params(WaitsQuery), security((), ("token" = [])),
    responses((status = 200, body = Vec<Object>), (status = "4XX", body = ErrorBody)))]
pub async fn waits(
    State(api): State<Api>,
    reader: Reader,
    query: Result<Query<WaitsQuery>, QueryRejection>,
) -> Result<Json<Vec<WaitView>>, Error> {
    let Query(query) = query?;
    let limit = query.limit.unwrap_or(100);
    if !(1..=500).contains(&limit) {
        return Err(Error::bad_request("limit must be 1 to 500").with_field("limit"));
    }
    let mut waits = api.store().waits(query.run, limit).await?;
    if !reader.authenticated {
        waits.iter_mut().for_each(|w| w.token = None);
    }
    Ok(Json(waits))
}
