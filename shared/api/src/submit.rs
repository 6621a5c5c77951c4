//! What submitting a definition means, whether it comes whole (`POST /api/runs`) or registered
//! (`POST /api/workflows/{name}/runs`): the definition read from the request, submit's checks,
//! the store's submit, and the answer.

use axum::Json;
use axum::http::StatusCode;
use rara_domain::workflow::{Format, WorkflowDefinition};
use rara_store::submit::Origin;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::{Api, Error};

/// The run a submission created or found.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SubmitResponse {
    pub id: Uuid,
    /// `false` when the idempotency key matched an existing run (status 200, not 201).
    pub created: bool,
}

/// A definition as a request carries it: a JSON object, or its text (YAML or JSON).
pub(crate) fn definition_of(value: serde_json::Value) -> Result<WorkflowDefinition, Error> {
    match value {
        serde_json::Value::String(text) => Ok(WorkflowDefinition::parse(&text, Format::Yaml)?),
        object @ serde_json::Value::Object(_) => {
            Ok(serde_json::from_value(object).map_err(rara_domain::workflow::Error::from)?)
        }
        _ => Err(Error::bad_request("a definition is a JSON object or its text").with_field("definition")),
    }
}

/// Submit's checks and the store's submit, for a definition given whole or registered
/// (`origin`): `201` for a new run, `200` when the idempotency key found one.
pub(crate) async fn submit_definition(
    api: &Api,
    mut definition: WorkflowDefinition,
    inputs: &serde_json::Map<String, serde_json::Value>,
    idempotency_key: Option<String>,
    origin: Origin,
) -> Result<(StatusCode, Json<SubmitResponse>), Error> {
    if idempotency_key.is_some() {
        definition.idempotency_key = idempotency_key;
    }
    let builtins = &api.inner.builtins;
    let plan =
        definition.plan_for(&api.inner.config, inputs, |op, version| builtins.in_process(op, version).is_some())?;
    let submitted = rara_operator::inputs::submit(api.store(), api.offload().as_ref(), plan, None, origin).await?;
    let status = if submitted.created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(SubmitResponse { id: submitted.run_id, created: submitted.created })))
}
