//! Schedules under `/api/schedules`: create one (checked as `rara schedule create` checks it),
//! list them with their next fire and last run, read one, pause, resume, delete, trigger one run
//! now, backfill a range of slots. The CLI's `rara schedule` does the same over the database;
//! both go through `rara_operator::schedules`.

use std::time::Duration;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use rara_domain::schedule::{DEFAULT_CATCHUP_WINDOW, Overlap, Spec};
use rara_domain::workflow::WorkflowRef;
use rara_operator::schedules::{self, CreateSchedule, Fired};
use rara_store::schedules::ScheduleView;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::body::ObjectBody;
use crate::{Api, Error, ErrorBody, Reader, auth::Credentials};

/// The most schedules a listing holds.
pub const MAX_LISTED: u32 = 1000;

pub(crate) fn routes() -> axum::Router<Api> {
    axum::Router::new()
        .route("/api/schedules", post(create).get(list))
        .route("/api/schedules/{name}", get(one).delete(delete))
        .route("/api/schedules/{name}/pause", post(pause))
        .route("/api/schedules/{name}/resume", post(resume))
        .route("/api/schedules/{name}/trigger", post(trigger))
        .route("/api/schedules/{name}/backfill", post(backfill))
}

/// A schedule to create: a cron or an interval, exactly one.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRequest {
    pub name: String,
    /// A registered workflow: `NAME` or `NAME@latest` (the newest version at each slot), `NAME@3`.
    pub workflow: String,
    /// Five fields (`0 2 * * *`), read in `timezone`.
    #[serde(default)]
    pub cron: Option<String>,
    /// A slot every so many seconds (from the Unix epoch), 1 to 366 days.
    #[serde(default)]
    pub every_seconds: Option<u64>,
    /// An IANA time zone (default `UTC`).
    #[serde(default)]
    pub timezone: Option<String>,
    /// The run inputs; `{"$schedule": "/slot_time"}` is the slot's time.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub inputs: serde_json::Map<String, serde_json::Value>,
    /// `skip` (default), `buffer_one`, `allow`, `cancel_previous`.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub overlap: Option<Overlap>,
    /// Missed slots within this fire (default 3600).
    #[serde(default)]
    pub catchup_window_seconds: Option<u64>,
    /// Each slot fires up to this long after its time (default 0).
    #[serde(default)]
    pub jitter_seconds: Option<u64>,
}

/// The range of a backfill: one run per slot in `[from, to)`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BackfillRequest {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

/// What a trigger or a backfill made.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FiredResponse {
    pub slots: usize,
    /// New runs (a slot that had its run keeps it).
    pub created: usize,
    pub runs: Vec<uuid::Uuid>,
}

/// The schedules.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ScheduleList {
    /// Each as `rara schedule list --json` prints it.
    #[schema(value_type = Vec<Object>)]
    pub schedules: Vec<ScheduleView>,
}

pub(crate) fn operator(e: schedules::Error) -> Error {
    match e {
        schedules::Error::Store(e) => e.into(),
        schedules::Error::Workflow(e) => e.into(),
        schedules::Error::Invalid(e) => Error::bad_request(e.message).with_field(e.field),
        e @ schedules::Error::TooManySlots { .. } => Error::bad_request(e.to_string()).with_field("to"),
    }
}

fn name_of(name: Result<Path<String>, PathRejection>) -> Result<String, Error> {
    Ok(name.map_err(|e| Error::bad_request(e.body_text()).with_field("name"))?.0)
}

pub(crate) fn in_process(api: &Api) -> impl Fn(&str, Option<&str>) -> bool + '_ {
    |op, version| api.inner.builtins.in_process(op, version).is_some()
}

/// Create a schedule.
#[utoipa::path(post, path = "/api/schedules", request_body = CreateRequest, security(("token" = [])),
    responses((status = 201, body = Object, description = "the schedule"), (status = "4XX", body = ErrorBody)))]
pub async fn create(
    State(api): State<Api>,
    credentials: Credentials,
    body: Result<ObjectBody<CreateRequest>, Error>,
) -> Result<(StatusCode, Json<ScheduleView>), Error> {
    api.auth().check_request(&credentials)?;
    let request = body?.0;
    let workflow: WorkflowRef =
        request.workflow.parse().map_err(|e: String| Error::bad_request(e).with_field("workflow"))?;
    let spec = match (request.cron, request.every_seconds) {
        (Some(cron), None) => Spec::Cron(cron),
        (None, Some(seconds)) => Spec::Every(Duration::from_secs(seconds.min(u64::from(u32::MAX)))),
        _ => return Err(Error::bad_request("give cron or every_seconds, one of the two").with_field("cron")),
    };
    let seconds =
        |s: Option<u64>, default: Duration| s.map_or(default, |s| Duration::from_secs(s.min(u64::from(u32::MAX))));
    let new = CreateSchedule {
        name: request.name,
        workflow,
        spec,
        timezone: request.timezone.unwrap_or_else(|| "UTC".to_owned()),
        inputs: request.inputs,
        overlap: request.overlap.unwrap_or_default(),
        catchup_window: seconds(request.catchup_window_seconds, DEFAULT_CATCHUP_WINDOW),
        jitter: seconds(request.jitter_seconds, Duration::ZERO),
    };
    let view = schedules::create(api.store(), &api.inner.config, &in_process(&api), new).await.map_err(operator)?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// The schedules, with their next fire and their last run's status.
#[utoipa::path(get, path = "/api/schedules", operation_id = "list_schedules", responses((status = 200, body = ScheduleList), (status = "4XX", body = ErrorBody)))]
pub async fn list(State(api): State<Api>, _reader: Reader) -> Result<Json<ScheduleList>, Error> {
    Ok(Json(ScheduleList { schedules: api.store().schedules(MAX_LISTED).await? }))
}

/// One schedule.
#[utoipa::path(get, path = "/api/schedules/{name}", params(("name" = String, Path)),
    responses((status = 200, body = Object, description = "the schedule"), (status = "4XX", body = ErrorBody)))]
pub async fn one(
    State(api): State<Api>,
    _reader: Reader,
    name: Result<Path<String>, PathRejection>,
) -> Result<Json<ScheduleView>, Error> {
    Ok(Json(api.store().schedule(&name_of(name)?).await?))
}

/// Delete a schedule (its runs stay).
#[utoipa::path(delete, path = "/api/schedules/{name}", params(("name" = String, Path)), security(("token" = [])),
    responses((status = 204, description = "deleted"), (status = "4XX", body = ErrorBody)))]
pub async fn delete(
    State(api): State<Api>,
    credentials: Credentials,
    name: Result<Path<String>, PathRejection>,
) -> Result<StatusCode, Error> {
    api.auth().check_request(&credentials)?;
    api.store().delete_schedule(&name_of(name)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn set_paused(
    api: &Api,
    credentials: &Credentials,
    name: String,
    paused: bool,
) -> Result<Json<ScheduleView>, Error> {
    api.auth().check_request(credentials)?;
    api.store().set_schedule_paused(&name, paused).await?;
    Ok(Json(api.store().schedule(&name).await?))
}

/// Pause a schedule: its slots are decided at resume (within the catch-up window they fire).
#[utoipa::path(post, path = "/api/schedules/{name}/pause", params(("name" = String, Path)), security(("token" = [])),
    responses((status = 200, body = Object, description = "the schedule"), (status = "4XX", body = ErrorBody)))]
pub async fn pause(
    State(api): State<Api>,
    credentials: Credentials,
    name: Result<Path<String>, PathRejection>,
) -> Result<Json<ScheduleView>, Error> {
    set_paused(&api, &credentials, name_of(name)?, true).await
}

/// Resume a schedule.
#[utoipa::path(post, path = "/api/schedules/{name}/resume", params(("name" = String, Path)), security(("token" = [])),
    responses((status = 200, body = Object, description = "the schedule"), (status = "4XX", body = ErrorBody)))]
pub async fn resume(
    State(api): State<Api>,
    credentials: Credentials,
    name: Result<Path<String>, PathRejection>,
) -> Result<Json<ScheduleView>, Error> {
    set_paused(&api, &credentials, name_of(name)?, false).await
}

fn fired(fired: Fired) -> Json<FiredResponse> {
    Json(FiredResponse { slots: fired.slots, created: fired.created, runs: fired.runs })
}

/// One run now, outside the calendar and the overlap policy.
#[utoipa::path(post, path = "/api/schedules/{name}/trigger", params(("name" = String, Path)), security(("token" = [])),
    responses((status = 200, body = FiredResponse), (status = "4XX", body = ErrorBody)))]
pub async fn trigger(
    State(api): State<Api>,
    credentials: Credentials,
    name: Result<Path<String>, PathRejection>,
) -> Result<Json<FiredResponse>, Error> {
    api.auth().check_request(&credentials)?;
    let name = name_of(name)?;
    let made = schedules::trigger(api.store(), &api.inner.config, &in_process(&api), &name).await.map_err(operator)?;
    Ok(fired(made))
}

/// One run per slot of a range (at most 1000 slots; the slots' keys make a second backfill add nothing).
#[utoipa::path(post, path = "/api/schedules/{name}/backfill", params(("name" = String, Path)),
    request_body = BackfillRequest, security(("token" = [])),
    responses((status = 200, body = FiredResponse), (status = "4XX", body = ErrorBody)))]
pub async fn backfill(
    State(api): State<Api>,
    credentials: Credentials,
    name: Result<Path<String>, PathRejection>,
    body: Result<ObjectBody<BackfillRequest>, Error>,
) -> Result<Json<FiredResponse>, Error> {
    api.auth().check_request(&credentials)?;
    let name = name_of(name)?;
    let BackfillRequest { from, to } = body?.0;
    let made = schedules::backfill(api.store(), &api.inner.config, &in_process(&api), &name, from, to)
        .await
        .map_err(operator)?;
    Ok(fired(made))
}
