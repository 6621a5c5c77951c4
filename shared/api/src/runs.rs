//! The JSON API under `/api`. Reads are open unless the server requires authentication for
//! them, and an anonymous reader is not shown fences and lease data ([`crate::redact`]); every
//! state-changing request needs the token ([`crate::auth`]). Bad input (malformed JSON, unknown fields, a bad cursor, a body over
//! [`crate::MAX_BODY_BYTES`]) gets a structured 4xx and changes nothing. The console's forms
//! call the same functions (`cancel`, `retry`, `bulk`).

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use rara_domain::state::RunStatus;
use rara_operator::bulk;
use rara_store::browse::RunFilter;
use rara_store::read::RunView;
use rara_store::submit::Origin;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::body::{ObjectBody, optional_object};
pub use crate::list::{DEFAULT_LIMIT, ListQuery, MAX_LIMIT, RunPage};
pub use crate::submit::SubmitResponse;
use crate::{Api, Error, ErrorBody, Reader, auth::Credentials};

pub(crate) fn routes() -> axum::Router<Api> {
    axum::Router::new()
        .route("/api/runs", post(submit).get(crate::list::list))
        .route("/api/runs/{id}", get(run))
        .route("/api/runs/{id}/cancel", post(cancel_run))
        .route("/api/steps/{id}/cancel", post(cancel_step))
        .route("/api/steps/{id}/retry", post(retry_step))
        .route("/api/bulk/cancel", post(bulk_cancel))
        .route("/api/bulk/retry", post(bulk_retry))
}

/// A workflow to run.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitRequest {
    /// The workflow definition: a JSON object, or its text (YAML or JSON), as `rara submit` reads a file.
    #[schema(value_type = Object)]
    pub definition: serde_json::Value,
    /// The run's inputs, checked against the definition's declared `inputs` (like `rara submit
    /// --input-json`): a declared input without a default is required.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub inputs: serde_json::Map<String, serde_json::Value>,
    /// Overrides the definition's idempotency key: the same key returns the existing run.
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// Why a run or a step is cancelled.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    /// Recorded as the cancelled steps' error message (default "cancelled by an operator").
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CancelResponse {
    pub id: Uuid,
    /// `run` or `step`.
    pub kind: String,
    /// Steps cancelled (0: nothing was left to cancel).
    pub cancelled_steps: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RetryResponse {
    pub step_id: Uuid,
    pub run_id: Uuid,
    /// Steps back to `pending`: the step and the dependents that had been skipped.
    pub revived_steps: u64,
}

/// A bulk action over the runs a filter matches. Send `dry_run: true` first to see the count.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkRequest {
    #[schema(value_type = Option<String>)]
    pub status: Option<RunStatus>,
    pub name: Option<String>,
    pub created_after: Option<DateTime<Utc>>,
    pub created_before: Option<DateTime<Utc>>,
    /// As the list's `error`: runs with a step that failed or was cancelled with this error code.
    pub error: Option<String>,
    /// As the list's `workflow`: `NAME` or `NAME@VERSION`; not with `name`.
    pub workflow: Option<String>,
    /// As the list's `where`: `inputs.PATH=VALUE` conditions, all of which must hold (at most 4).
    #[serde(default, rename = "where")]
    pub wheres: Vec<String>,
    /// Count what would change, change nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// For a cancel: the reason recorded.
    #[serde(default)]
    pub reason: Option<String>,
    /// For a replay: a rerun from each run's first failed step (runs with none are left
    /// alone), instead of a new run of every step.
    #[serde(default)]
    pub from_failed: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BulkResponse {
    /// Runs (cancel) or steps (retry) the filter matched.
    pub matched: u64,
    /// Steps changed (0 for a dry run).
    pub changed: u64,
    pub dry_run: bool,
}

const DEFAULT_REASON: &str = "cancelled by an operator";

/// Submit a run.
#[utoipa::path(post, path = "/api/runs", request_body = SubmitRequest, security(("token" = [])),
    responses((status = 201, body = SubmitResponse, description = "created"),
              (status = 200, body = SubmitResponse, description = "the idempotency key matched an existing run"),
              (status = "4XX", body = ErrorBody)))]
pub async fn submit(
    State(api): State<Api>,
    credentials: Credentials,
    body: Result<ObjectBody<SubmitRequest>, Error>,
) -> Result<(StatusCode, Json<SubmitResponse>), Error> {
    api.auth().check_request(&credentials)?;
    let request = body?.0;
    let definition = crate::submit::definition_of(request.definition)?;
    crate::submit::submit_definition(&api, definition, &request.inputs, request.idempotency_key, Origin::default())
        .await
}

/// A run with its steps, attempts, artifacts and progress (what `rara status --json` prints);
/// without the token or a session, without fences and lease data (holders, fences, lease expiries).
#[utoipa::path(get, path = "/api/runs/{id}", params(("id" = Uuid, Path, description = "the run id")),
    security((), ("token" = [])),
    responses((status = 200, body = Object, description = "the run"), (status = "4XX", body = ErrorBody)))]
pub async fn run(
    State(api): State<Api>,
    reader: Reader,
    id: Result<Path<Uuid>, PathRejection>,
) -> Result<Json<serde_json::Value>, Error> {
    let Path(id) = id?;
    let run: RunView = api.store().run(id).await?;
    Ok(Json(crate::redact::run_json(&run, reader)?))
}

/// Cancels a run (`step == false`) or a step; detached attempts are told at once.
pub(crate) async fn cancel(api: &Api, id: Uuid, step: bool, reason: Option<String>) -> Result<CancelResponse, Error> {
    // The id must name what the path says before anything is cancelled.
    if step {
        api.store().run_of_step(id).await?;
    } else {
        api.store().run_status(id).await?;
    }
    let reason = reason.unwrap_or_else(|| DEFAULT_REASON.to_owned());
    let done = rara_operator::cancel::cancel_with(api.remote_security(), api.store(), id, &reason).await?;
    Ok(CancelResponse { id, kind: done.kind.to_owned(), cancelled_steps: done.steps })
}

/// Gives a failed or cancelled step a new attempt budget.
pub(crate) async fn retry(api: &Api, step_id: Uuid) -> Result<RetryResponse, Error> {
    let revived = api.store().retry_step(step_id).await?;
    let run_id = api.store().run_of_step(step_id).await?;
    if revived == 0 {
        return Err(Error::conflict(format!("step {step_id} has not failed or been cancelled; nothing to retry")));
    }
    Ok(RetryResponse { step_id, run_id, revived_steps: revived })
}

async fn cancel_request(
    api: &Api,
    credentials: &Credentials,
    id: Result<Path<Uuid>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
    step: bool,
) -> Result<Json<CancelResponse>, Error> {
    api.auth().check_request(credentials)?;
    let Path(id) = id?;
    let request = optional_object::<CancelRequest>(&body?)?;
    Ok(Json(cancel(api, id, step, request.reason).await?))
}

/// Cancel a run: every unfinished step.
#[utoipa::path(post, path = "/api/runs/{id}/cancel", params(("id" = Uuid, Path, description = "the run id")),
    request_body(content = CancelRequest, description = "optional"), security(("token" = [])),
    responses((status = 200, body = CancelResponse), (status = "4XX", body = ErrorBody)))]
pub async fn cancel_run(
    State(api): State<Api>,
    credentials: Credentials,
    id: Result<Path<Uuid>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<CancelResponse>, Error> {
    cancel_request(&api, &credentials, id, body, false).await
}

/// Cancel one step.
#[utoipa::path(post, path = "/api/steps/{id}/cancel", params(("id" = Uuid, Path, description = "the step id")),
    request_body(content = CancelRequest, description = "optional"), security(("token" = [])),
    responses((status = 200, body = CancelResponse), (status = "4XX", body = ErrorBody)))]
pub async fn cancel_step(
    State(api): State<Api>,
    credentials: Credentials,
    id: Result<Path<Uuid>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<CancelResponse>, Error> {
    cancel_request(&api, &credentials, id, body, true).await
}

/// Retry a failed or cancelled step; its skipped dependents come back.
#[utoipa::path(post, path = "/api/steps/{id}/retry", params(("id" = Uuid, Path, description = "the step id")),
    security(("token" = [])),
    responses((status = 200, body = RetryResponse), (status = 409, body = ErrorBody, description = "nothing to retry"),
              (status = "4XX", body = ErrorBody)))]
pub async fn retry_step(
    State(api): State<Api>,
    credentials: Credentials,
    id: Result<Path<Uuid>, PathRejection>,
) -> Result<Json<RetryResponse>, Error> {
    api.auth().check_request(&credentials)?;
    let Path(id) = id?;
    Ok(Json(retry(&api, id).await?))
}

impl BulkRequest {
    /// Refuses `from_failed` in a bulk request other than a replay.
    fn only_replays(&self) -> Result<(), Error> {
        match self.from_failed {
            true => Err(Error::bad_request("only a replay takes from_failed").with_field("from_failed")),
            false => Ok(()),
        }
    }

    /// The search, each filter checked as the list checks it.
    pub(crate) fn filter(&self) -> Result<RunFilter, Error> {
        let search = ListQuery {
            status: self.status,
            name: self.name.clone(),
            created_after: self.created_after,
            created_before: self.created_before,
            error: self.error.clone(),
            workflow: self.workflow.clone(),
            wheres: self.wheres.clone(),
            ..ListQuery::default()
        };
        search.filter()
    }
}

/// A bulk action over the runs a filter matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bulk {
    /// Cancel every unfinished run.
    Cancel,
    /// Retry every failed or cancelled step.
    Retry,
}

/// Counts what `action` matches and, unless `dry_run`, does it: one statement per batch, at
/// most [`bulk::MAX_STEPS`] steps (retry) or [`bulk::MAX_RUNS`] runs (cancel) per request.
pub(crate) async fn bulk(
    api: &Api,
    action: Bulk,
    filter: &RunFilter,
    dry_run: bool,
    reason: Option<&str>,
) -> Result<BulkResponse, Error> {
    let done = match action {
        Bulk::Cancel => {
            let reason = reason.unwrap_or(DEFAULT_REASON);
            bulk::cancel_with(api.remote_security(), api.store(), filter, reason, dry_run).await
        }
        Bulk::Retry => bulk::retry(api.store(), filter, dry_run).await,
    };
    let done = done?;
    Ok(BulkResponse { matched: done.matched, changed: done.changed, dry_run })
}

/// Cancel every unfinished run a filter matches (`dry_run: true` counts them), at most 10,000
/// runs a request (more: 422 `too_many`, nothing changed; narrow the filter).
#[utoipa::path(post, path = "/api/bulk/cancel", request_body = BulkRequest, security(("token" = [])),
    responses((status = 200, body = BulkResponse),
              (status = 422, body = ErrorBody, description = "`too_many`: the filter matches more runs than a request takes"),
              (status = "4XX", body = ErrorBody)))]
pub async fn bulk_cancel(
    State(api): State<Api>,
    credentials: Credentials,
    body: Result<ObjectBody<BulkRequest>, Error>,
) -> Result<Json<BulkResponse>, Error> {
    api.auth().check_request(&credentials)?;
    let request = body?.0;
    request.only_replays()?;
    Ok(Json(bulk(&api, Bulk::Cancel, &request.filter()?, request.dry_run, request.reason.as_deref()).await?))
}

/// Retry every failed or cancelled step of the runs a filter matches (`dry_run: true` counts
/// them), at most 10,000 steps a request (more: 422 `too_many`, nothing changed; narrow the
/// filter).
#[utoipa::path(post, path = "/api/bulk/retry", request_body = BulkRequest, security(("token" = [])),
    responses((status = 200, body = BulkResponse),
              (status = 422, body = ErrorBody, description = "`too_many`: the filter matches more steps than a request takes"),
              (status = "4XX", body = ErrorBody)))]
pub async fn bulk_retry(
    State(api): State<Api>,
    credentials: Credentials,
    body: Result<ObjectBody<BulkRequest>, Error>,
) -> Result<Json<BulkResponse>, Error> {
    api.auth().check_request(&credentials)?;
    let request = body?.0;
    if request.reason.is_some() {
        return Err(Error::bad_request("a retry takes no reason").with_field("reason"));
    }
    request.only_replays()?;
    Ok(Json(bulk(&api, Bulk::Retry, &request.filter()?, request.dry_run, None).await?))
}
