//! Rerun from a step over HTTP (docs/src/guide/recover.md): `POST /api/runs/{id}/rerun` makes a
//! new run in which the step named and everything downstream of it run again and every other
//! step is carried over ([`rara_store::rerun`]); `POST /api/bulk/replay` replays the finished
//! runs a filter matches ([`rara_operator::replay`]).

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use rara_store::rerun::{Rerun, RerunRequest};
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::body::ObjectBody;
use crate::runs::BulkRequest;
use crate::{Api, Error, ErrorBody, auth::Credentials};

/// The exit code of a refused rerun (`rara rerun`, as `rara exit-codes` lists it).
pub const RERUN_REFUSED_EXIT: u8 = 10;

pub(crate) fn routes() -> axum::Router<Api> {
    axum::Router::new().route("/api/runs/{id}/rerun", post(rerun)).route("/api/bulk/replay", post(replay))
}

/// What to run again.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RerunBody {
    /// The step to run again, with everything downstream of it.
    pub from: String,
    /// Run inputs that replace the original's, by name (each one the original has, of the
    /// same JSON kind).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub inputs: serde_json::Map<String, serde_json::Value>,
    /// Rerun even when a carried-over step read a run input that changes.
    #[serde(default)]
    pub force: bool,
    /// A registered version to make the rerun from (`NAME@VERSION`, `NAME` for the newest):
    /// refused, naming the first difference, unless the steps carried over are unchanged in it.
    #[serde(default)]
    pub workflow: Option<String>,
}

/// The rerun made.
#[derive(Debug, Clone, serde::Serialize, Deserialize, ToSchema)]
pub struct RerunResponse {
    pub id: Uuid,
    pub rerun_of: Uuid,
    /// The steps carried over (not run again), in definition order.
    pub carried: Vec<String>,
    /// The steps that run again.
    pub rerun: Vec<String>,
}

impl From<Rerun> for RerunResponse {
    fn from(r: Rerun) -> Self {
        RerunResponse { id: r.run_id, rerun_of: r.rerun_of, carried: r.carried, rerun: r.rerun }
    }
}

/// Makes the rerun of `run_id` that `body` asks for (the API's and the console's).
pub(crate) async fn make(api: &Api, run_id: Uuid, body: RerunBody) -> Result<RerunResponse, Error> {
    if body.from.is_empty() || body.from.len() > rara_domain::workflow::MAX_NAME_LEN {
        return Err(Error::bad_request("a step name").with_field("from"));
    }
    let original = api.store().run_inputs(run_id).await?;
    let max = api.inner.config.max_input_bytes;
    let inputs = rara_domain::inputs::replace(&original, &body.inputs, max).map_err(|problems| {
        let first = problems.first().map(|p| p.path.clone()).unwrap_or_default();
        let said: Vec<String> = problems.iter().map(|p| format!("{}: {}", p.path, p.message)).collect();
        Error::bad_request(said.join("\n")).with_field(first)
    })?;
    let inputs = inputs.as_object().cloned().unwrap_or_default();
    let version = match &body.workflow {
        None => None,
        Some(text) => {
            let workflow = text.parse().map_err(|e: String| Error::bad_request(e).with_field("workflow"))?;
            let in_process = |op: &str, v: Option<&str>| api.inner.builtins.in_process(op, v).is_some();
            let config = &api.inner.config;
            Some(rara_operator::rerun::plan_version(api.store(), config, &in_process, &inputs, &workflow).await)
        }
    };
    let made = match version.transpose() {
        Ok(version) => {
            let request =
                RerunRequest { from: Some(body.from), idempotency_key: None, inputs, force: body.force, version };
            api.store().rerun(run_id, &request).await
        }
        Err(e) => Err(e),
    };
    match made {
        Ok(made) => Ok(made.into()),
        Err(e @ rara_store::Error::RerunRefused(_)) => {
            Err(Error::new(StatusCode::CONFLICT, "rerun_refused", e.to_string(), RERUN_REFUSED_EXIT))
        }
        Err(e) => Err(e.into()),
    }
}

/// Rerun a run from a step: a new run, linked to this one, in which the step and everything
/// downstream of it run again and every other step is carried over with its output.
#[utoipa::path(post, path = "/api/runs/{id}/rerun", params(("id" = Uuid, Path, description = "the run id")),
    request_body = RerunBody, security(("token" = [])),
    responses((status = 201, body = RerunResponse, description = "the rerun was made"),
              (status = 409, body = ErrorBody, description = "refused: why, naming the step"),
              (status = "4XX", body = ErrorBody)))]
pub async fn rerun(
    State(api): State<Api>,
    credentials: Credentials,
    id: Result<Path<Uuid>, PathRejection>,
    body: Result<ObjectBody<RerunBody>, Error>,
) -> Result<(StatusCode, Json<RerunResponse>), Error> {
    api.auth().check_request(&credentials)?;
    let Path(run_id) = id?;
    Ok((StatusCode::CREATED, Json(make(&api, run_id, body?.0).await?)))
}

/// What a replay did (or would do).
#[derive(Debug, Clone, serde::Serialize, Deserialize, ToSchema)]
pub struct ReplayResponse {
    /// Finished runs the filter matched.
    pub matched: u64,
    /// Of those, replayed before: nothing is made for them.
    pub already: u64,
    /// Replays made now (0 for a dry run).
    pub made: u64,
    /// With `from_failed`: runs with no failed step.
    pub nothing_failed: u64,
    /// Runs whose replay was refused, each with why.
    pub refused: Vec<ReplayRefusal>,
    /// The replays made: each original and its new run.
    pub runs: Vec<ReplayMade>,
    pub dry_run: bool,
}

#[derive(Debug, Clone, serde::Serialize, Deserialize, ToSchema)]
pub struct ReplayRefusal {
    pub run_id: Uuid,
    pub why: String,
}

#[derive(Debug, Clone, serde::Serialize, Deserialize, ToSchema)]
pub struct ReplayMade {
    pub original: Uuid,
    pub id: Uuid,
}

/// Replay the finished runs a filter matches: one new run each with the same inputs (or, with
/// `from_failed`, a rerun from its first failed step), once per run however often asked; at
/// most 1,000 runs a request (more: 422 `too_many`, nothing made).
#[utoipa::path(post, path = "/api/bulk/replay", request_body = BulkRequest, security(("token" = [])),
    responses((status = 200, body = ReplayResponse),
              (status = 422, body = ErrorBody, description = "`too_many`: the filter matches more runs than a request takes"),
              (status = "4XX", body = ErrorBody)))]
pub async fn replay(
    State(api): State<Api>,
    credentials: Credentials,
    body: Result<ObjectBody<BulkRequest>, Error>,
) -> Result<Json<ReplayResponse>, Error> {
    api.auth().check_request(&credentials)?;
    let request = body?.0;
    if request.reason.is_some() {
        return Err(Error::bad_request("a replay takes no reason").with_field("reason"));
    }
    let done =
        rara_operator::replay::replay(api.store(), &request.filter()?, request.from_failed, request.dry_run).await?;
    Ok(Json(ReplayResponse {
        matched: done.matched,
        already: done.already,
        made: done.made,
        nothing_failed: done.nothing_failed,
        refused: done.refused.into_iter().map(|(run_id, why)| ReplayRefusal { run_id, why }).collect(),
        runs: done.runs.into_iter().map(|(original, id)| ReplayMade { original, id }).collect(),
        dry_run: request.dry_run,
    }))
}
