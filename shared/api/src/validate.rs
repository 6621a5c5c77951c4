//! `POST /api/workflows/validate`: a definition checked as submit checks it (with the run's
//! inputs) or as `rara workflow register` checks it (without), every problem at its field path,
//! nothing stored. A client checks a definition built in code here before it submits it.

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use rara_domain::workflow::{Error as WorkflowError, Problem};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::body::ObjectBody;
use crate::submit::definition_of;
use crate::{Api, Error, ErrorBody, Reader};

pub(crate) fn routes() -> axum::Router<Api> {
    axum::Router::new().route("/api/workflows/validate", post(validate).get(versions_of_validate))
}

/// `GET /api/workflows/validate` stays what it would be without this route: the versions of a
/// workflow named `validate`.
#[utoipa::path(get, path = "/api/workflows/validate", operation_id = "versions_of_validate",
    responses((status = 200, body = crate::workflows::WorkflowVersions, description = "the versions of the workflow named `validate`"),
              (status = "4XX", body = ErrorBody)))]
pub async fn versions_of_validate(
    api: State<Api>,
    reader: Reader,
) -> Result<Json<crate::workflows::WorkflowVersions>, Error> {
    crate::workflows::versions(api, reader, Ok(axum::extract::Path("validate".to_owned()))).await
}

/// A definition to check.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ValidateRequest {
    /// The workflow definition: a JSON object, or its text (YAML or JSON), as `POST /api/runs`
    /// takes it.
    #[schema(schema_with = object_or_text)]
    pub definition: serde_json::Value,
    /// The run's inputs: when given, checked as `POST /api/runs` checks them (a required input
    /// missing is a problem); when absent, as a registration checks the definition (a required
    /// input stands in with a value of its declared type).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub inputs: Option<serde_json::Map<String, serde_json::Value>>,
}

/// A definition's schema: an object, or its text (text that does not parse is a problem).
fn object_or_text() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
    Schema::OneOf(
        OneOfBuilder::new()
            .item(ObjectBuilder::new().schema_type(Type::Object).description(Some("the definition as JSON")))
            .item(ObjectBuilder::new().schema_type(Type::String).description(Some("its YAML or JSON text")))
            .build(),
    )
}

/// What is wrong with a definition: nothing when `valid`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ValidateResponse {
    pub valid: bool,
    /// In the order the CLI prints them.
    pub problems: Vec<ProblemBody>,
}

/// One problem of a definition.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProblemBody {
    /// The path in the definition, as `rara submit` prints it (`steps[1].input.text`); empty
    /// when the definition does not parse.
    pub path: String,
    /// The same path as an error's `field` names it (`definition.steps[1].input.text`).
    pub field: String,
    pub message: String,
}

impl From<Problem> for ProblemBody {
    fn from(problem: Problem) -> Self {
        ProblemBody { field: format!("definition.{}", problem.path), path: problem.path, message: problem.message }
    }
}

/// Check a definition (and, when given, the run's inputs) as submit would; nothing is stored.
#[utoipa::path(post, path = "/api/workflows/validate", request_body = ValidateRequest,
    responses((status = 200, body = ValidateResponse, description = "checked: `valid`, or its problems"),
              (status = "4XX", body = ErrorBody)))]
pub async fn validate(
    State(api): State<Api>,
    _reader: Reader,
    ObjectBody(request): ObjectBody<ValidateRequest>,
) -> Result<Json<ValidateResponse>, Error> {
    let definition = match definition_of(request.definition) {
        Ok(definition) => definition,
        // Text or an object that does not read as a definition: one problem, no path.
        Err(e) if e.body.code == "invalid_workflow" => {
            let field = e.body.field.unwrap_or_else(|| "definition".to_owned());
            let problem = ProblemBody { path: String::new(), field, message: e.body.message };
            return Ok(Json(ValidateResponse { valid: false, problems: vec![problem] }));
        }
        Err(e) => return Err(e),
    };
    let builtins = &api.inner.builtins;
    let in_process = |op: &str, version: Option<&str>| builtins.in_process(op, version).is_some();
    let checked = match &request.inputs {
        Some(inputs) => definition.plan_for(&api.inner.config, inputs, in_process).map(|_| ()),
        None => definition.check_for_register(&api.inner.config, in_process),
    };
    match checked {
        Ok(()) => Ok(Json(ValidateResponse { valid: true, problems: Vec::new() })),
        Err(WorkflowError::Invalid(problems)) => {
            Ok(Json(ValidateResponse { valid: false, problems: problems.into_iter().map(ProblemBody::from).collect() }))
        }
        Err(e) => Err(e.into()),
    }
}
