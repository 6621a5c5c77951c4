//! The OpenAPI document, generated from the handlers of [`crate::runs`] and [`crate::login`] by utoipa, served at
//! `/openapi.json` and committed as `docs/openapi.json` (`tests/openapi.rs` fails when the
//! committed file drifts; `RARA_WRITE_OPENAPI=1` rewrites it).

use axum::Json;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::runs;

#[derive(Debug, OpenApi)]
#[openapi(
    info(title = "rara API", description = "Submit, list, inspect, cancel and retry rara workflow runs. \
        State-changing requests need `Authorization: Bearer <token>` (the token `rara ui` prints); \
        in AWS the function URL's IAM auth admits callers instead. Reads need the token (or a console \
        session) where the server requires it (`rara ui` off loopback or with `--read-auth`); an \
        anonymous reader is not shown fences and lease data."),
    paths(runs::submit, crate::list::list, runs::run, runs::cancel_run, runs::cancel_step, runs::retry_step,
          runs::bulk_cancel, runs::bulk_retry, crate::login::issue, crate::waits::signal, crate::waits::event,
          crate::waits::complete, crate::waits::waits, crate::rerun::rerun, crate::rerun::replay,
          crate::artifacts::download, crate::artifacts::output,
          crate::workflows::register, crate::workflows::list, crate::validate::validate, crate::validate::versions_of_validate,
          crate::workflows::versions, crate::workflows::version, crate::workflows::submit,
          crate::schedules::create, crate::schedules::list, crate::schedules::one, crate::schedules::delete,
          crate::schedules::pause, crate::schedules::resume, crate::schedules::trigger, crate::schedules::backfill),
    components(schemas(crate::ErrorBody, crate::waits::SignalRequest, crate::waits::SignalResponse,
        crate::waits::EventRequest, crate::waits::EventResponse, crate::waits::CompletionResponse, runs::SubmitRequest, runs::SubmitResponse, crate::list::RunPage,
        runs::CancelRequest, runs::CancelResponse, runs::RetryResponse, runs::BulkRequest, runs::BulkResponse,
        crate::login::LoginResponse, crate::rerun::RerunBody, crate::rerun::RerunResponse,
        crate::rerun::ReplayResponse, crate::rerun::ReplayRefusal, crate::rerun::ReplayMade,
        crate::workflows::RegisterRequest, crate::workflows::RegisterResponse,
        crate::workflows::WorkflowList, crate::workflows::WorkflowVersions, crate::workflows::WorkflowRunRequest,
        crate::validate::ValidateRequest, crate::validate::ValidateResponse, crate::validate::ProblemBody,
        crate::schedules::CreateRequest, crate::schedules::BackfillRequest, crate::schedules::FiredResponse,
        crate::schedules::ScheduleList)),
    modifiers(&Token)
)]
pub struct ApiDoc;

struct Token;

impl Modify for Token {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        if let Some(components) = openapi.components.as_mut() {
            components.add_security_scheme(
                "token",
                SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
            );
        }
    }
}

/// The document as committed: pretty JSON with a final newline.
pub fn document() -> String {
    let mut text = ApiDoc::openapi().to_pretty_json().unwrap_or_default();
    text.push('\n');
    text
}

pub(crate) async fn serve() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
