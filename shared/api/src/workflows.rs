//! Registered definitions under `/api/workflows`: register one (checked as submit checks it; the
//! same content is the same version), list them, read a version, submit a run of one. The CLI's
//! `rara workflow` and `rara submit --workflow` do the same over the database.

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use rara_store::definitions::{Definition, Registered, Registration, Version};
use rara_store::submit::Origin;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::body::ObjectBody;
use crate::submit::{SubmitResponse, definition_of, submit_definition};
use crate::{Api, Error, ErrorBody, Reader, auth::Credentials};

/// The most workflows (and versions of one) a listing holds.
pub const MAX_LISTED: u32 = 1000;

pub(crate) fn routes() -> axum::Router<Api> {
    axum::Router::new()
        .route("/api/workflows", post(register).get(list))
        .route("/api/workflows/{name}", get(versions))
        .route("/api/workflows/{name}/versions/{version}", get(version))
        .route("/api/workflows/{name}/runs", post(submit))
}

/// A definition to register.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterRequest {
    /// The workflow definition: a JSON object, or its text (YAML or JSON), as `rara workflow
    /// register` reads a file.
    #[schema(value_type = Object)]
    pub definition: serde_json::Value,
}

/// The version a registration made or found.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RegisterResponse {
    pub name: String,
    pub version: i32,
    /// `false` when the same content was already this version (status 200, not 201).
    pub created: bool,
}

/// The registered workflows: each one's newest version and how many it has.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WorkflowList {
    #[schema(value_type = Vec<Object>)]
    pub workflows: Vec<Registration>,
}

/// The versions of one registered workflow, newest first.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WorkflowVersions {
    pub name: String,
    #[schema(value_type = Vec<Object>)]
    pub versions: Vec<Version>,
}

/// A run of a registered workflow.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkflowRunRequest {
    /// The version to run; the newest when absent.
    #[serde(default)]
    pub version: Option<i32>,
    /// The run's inputs, checked against the definition's declared `inputs`.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub inputs: serde_json::Map<String, serde_json::Value>,
    /// Overrides the definition's idempotency key: the same key returns the existing run.
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// Register a definition under its name.
#[utoipa::path(post, path = "/api/workflows", request_body = RegisterRequest, security(("token" = [])),
    responses((status = 201, body = RegisterResponse, description = "a new version"),
              (status = 200, body = RegisterResponse, description = "the same content: the version it already is"),
              (status = "4XX", body = ErrorBody)))]
pub async fn register(
    State(api): State<Api>,
    credentials: Credentials,
    body: Result<ObjectBody<RegisterRequest>, Error>,
) -> Result<(StatusCode, Json<RegisterResponse>), Error> {
    api.auth().check_request(&credentials)?;
    let definition = definition_of(body?.0.definition)?;
    let builtins = &api.inner.builtins;
    definition.check_for_register(&api.inner.config, |op, version| builtins.in_process(op, version).is_some())?;
    let content = serde_json::to_value(&definition).map_err(rara_domain::workflow::Error::from)?;
    let Registered { name, version, created, .. } = api.store().register_definition(&definition.name, &content).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(RegisterResponse { name, version, created })))
}

/// The registered workflows.
#[utoipa::path(get, path = "/api/workflows", operation_id = "list_workflows",
    responses((status = 200, body = WorkflowList), (status = "4XX", body = ErrorBody)))]
pub async fn list(State(api): State<Api>, _reader: Reader) -> Result<Json<WorkflowList>, Error> {
    Ok(Json(WorkflowList { workflows: api.store().definitions(MAX_LISTED).await? }))
}

/// The versions of a registered workflow.
#[utoipa::path(get, path = "/api/workflows/{name}", params(("name" = String, Path)),
    responses((status = 200, body = WorkflowVersions), (status = "4XX", body = ErrorBody)))]
pub async fn versions(
    State(api): State<Api>,
    _reader: Reader,
    name: Result<Path<String>, PathRejection>,
) -> Result<Json<WorkflowVersions>, Error> {
    let Path(name) = name.map_err(|e| Error::bad_request(e.body_text()).with_field("name"))?;
    let versions = api.store().definition_versions(&name, MAX_LISTED).await?;
    if versions.is_empty() {
        return Err(rara_store::Error::DefinitionNotFound { name, version: None }.into());
    }
    Ok(Json(WorkflowVersions { name, versions }))
}

/// One version of a registered workflow, with its definition.
#[utoipa::path(get, path = "/api/workflows/{name}/versions/{version}",
    params(("name" = String, Path), ("version" = i32, Path)),
    responses((status = 200, body = Object, description = "name, version, definition, created_at"),
              (status = "4XX", body = ErrorBody)))]
pub async fn version(
    State(api): State<Api>,
    _reader: Reader,
    path: Result<Path<(String, i32)>, PathRejection>,
) -> Result<Json<Definition>, Error> {
    let Path((name, version)) = path.map_err(|e| Error::bad_request(e.body_text()).with_field("version"))?;
    Ok(Json(api.store().definition(&name, Some(version)).await?))
}

/// Submit a run of a registered workflow (its newest version unless `version` says).
#[utoipa::path(post, path = "/api/workflows/{name}/runs", operation_id = "submit_workflow", params(("name" = String, Path)),
    request_body = WorkflowRunRequest, security(("token" = [])),
    responses((status = 201, body = SubmitResponse, description = "created"),
              (status = 200, body = SubmitResponse, description = "the idempotency key matched an existing run"),
              (status = "4XX", body = ErrorBody)))]
pub async fn submit(
    State(api): State<Api>,
    credentials: Credentials,
    name: Result<Path<String>, PathRejection>,
    body: Result<ObjectBody<WorkflowRunRequest>, Error>,
) -> Result<(StatusCode, Json<SubmitResponse>), Error> {
    api.auth().check_request(&credentials)?;
    let Path(name) = name.map_err(|e| Error::bad_request(e.body_text()).with_field("name"))?;
    let request = body?.0;
    let found = api.store().definition(&name, request.version).await?;
    let definition = definition_of(found.definition)?;
    let origin = Origin { workflow_version: Some(found.version), ..Origin::default() };
    submit_definition(&api, definition, &request.inputs, request.idempotency_key, origin).await
}
