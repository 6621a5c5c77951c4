//! `GET /api/artifacts/{id}`: an artifact's bytes, and `GET /api/steps/{id}/output`: a step's
//! offloaded output (`{"$stored": …}`), to authenticated callers only. From S3, a redirect to a
//! presigned URL valid [`PRESIGN_TTL`]; from a directory store, the bytes streamed.
//! Only an object inside the artifact store, under its run's prefix, is ever served: an
//! executor reports the URI, and `file:///etc/passwd` stays a name.
//!
//! Bytes served from this origin are always `application/octet-stream` and an attachment (with
//! `nosniff` from the guard): an executor chooses the media type, and a `text/html` artifact
//! must not run as a page of the console.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rara_artifacts::ArtifactStore;
use rara_domain::stored::Descriptor;

use crate::{Api, Error, ErrorBody, Reader};

/// How long a presigned URL downloads.
pub const PRESIGN_TTL: Duration = Duration::from_secs(300);

pub(crate) fn routes() -> axum::Router<Api> {
    axum::Router::new().route("/api/artifacts/{id}", get(download)).route("/api/steps/{id}/output", get(output))
}

/// Downloads an artifact: a `307` to a presigned URL (S3), or its bytes (a directory store).
#[utoipa::path(get, path = "/api/artifacts/{id}",
    params(("id" = i64, Path, description = "the artifact's id (`artifacts[].id` of a run's step)")),
    security(("token" = [])),
    responses((status = 307, description = "a presigned URL of the object (S3), valid 5 minutes, in `Location`"),
              (status = 200, description = "the artifact's bytes (a directory store)", content_type = "application/octet-stream"),
              (status = 401, body = ErrorBody, description = "not authenticated"),
              (status = 404, body = ErrorBody, description = "no such artifact, no store, or an object outside the store"),
              (status = 503, body = ErrorBody, description = "the artifact store is unavailable"),
              (status = "4XX", body = ErrorBody)))]
pub async fn download(
    State(api): State<Api>,
    reader: Reader,
    id: Result<Path<i64>, PathRejection>,
) -> Result<Response, Error> {
    authenticated(reader)?;
    let Path(id) = id?;
    let store = configured(&api)?;
    let row = api.store().artifact_by_id(id).await?.ok_or_else(|| Error::not_found(format!("no artifact {id}")))?;
    let Some(key) = in_store(store, &row.uri, &[row.run_id]) else {
        return Err(Error::not_found(format!(
            "artifact {id} is not in the artifact store under its run ({}): rara does not serve it",
            row.uri
        )));
    };
    serve(store, &key, &row.name, row.size_bytes).await
}

/// Downloads a step's output stored by reference: a `307` to a presigned URL (S3), or its bytes.
#[utoipa::path(get, path = "/api/steps/{id}/output",
    params(("id" = uuid::Uuid, Path, description = "the step's id (`steps[].id` of `GET /api/runs/{id}`)")),
    security(("token" = [])),
    responses((status = 307, description = "a presigned URL of the output's object (S3), valid 5 minutes, in `Location`"),
              (status = 200, description = "the output's JSON bytes (a directory store)", content_type = "application/octet-stream"),
              (status = 401, body = ErrorBody, description = "not authenticated"),
              (status = 404, body = ErrorBody, description = "no such step, an output held inline (read it from the run), no store, or an object outside the store"),
              (status = 503, body = ErrorBody, description = "the artifact store is unavailable"),
              (status = "4XX", body = ErrorBody)))]
pub async fn output(
    State(api): State<Api>,
    reader: Reader,
    id: Result<Path<uuid::Uuid>, PathRejection>,
) -> Result<Response, Error> {
    authenticated(reader)?;
    let Path(id) = id?;
    let store = configured(&api)?;
    let run_id = api.store().run_of_step(id).await?;
    let run = api.store().run(run_id).await?;
    let step = run.steps.iter().find(|s| s.id == id).ok_or_else(|| Error::not_found(format!("no step {id}")))?;
    let Some(stored) = step.output.as_ref().and_then(Descriptor::of) else {
        return Err(Error::not_found(format!(
            "step {} holds its output inline (or none): `GET /api/runs/{run_id}` shows it",
            step.name
        )));
    };
    // A step a rerun carried over shows the output of the step it was carried from.
    let mut runs = vec![run_id];
    if let Some(from) = step.carried_from {
        runs.push(api.store().run_of_step(from).await?);
    }
    let Some(key) = in_store(store, &stored.uri, &runs) else {
        return Err(Error::not_found(format!(
            "the output of step {} is not in the artifact store under its run ({}): rara does not serve it",
            step.name, stored.uri
        )));
    };
    serve(store, &key, "output.json", i64::try_from(stored.size_bytes).ok()).await
}

fn authenticated(reader: Reader) -> Result<(), Error> {
    if reader.authenticated {
        return Ok(());
    }
    Err(Error::unauthenticated(
        "artifacts are served to authenticated callers only: send the token as `Authorization: Bearer <token>` \
         or open the console's login URL",
    ))
}

fn configured(api: &Api) -> Result<&Arc<dyn ArtifactStore>, Error> {
    api.artifacts().ok_or_else(|| Error::not_found("no artifact store is configured (RARA_ARTIFACTS_URI)"))
}

/// The key of `uri` when it lies inside the store under one of `runs`.
fn in_store(store: &Arc<dyn ArtifactStore>, uri: &str, runs: &[uuid::Uuid]) -> Option<rara_artifacts::Key> {
    store.location().key_of(uri).ok().filter(|key| runs.iter().any(|run| key.is_of_run(*run)))
}

/// A presigned URL's redirect (S3), or the object's bytes (a directory store).
async fn serve(
    store: &Arc<dyn ArtifactStore>,
    key: &rara_artifacts::Key,
    name: &str,
    size: Option<i64>,
) -> Result<Response, Error> {
    match store.presign(key, PRESIGN_TTL).await.map_err(unavailable)? {
        Some(url) => {
            Ok((StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, url), (header::CACHE_CONTROL, "no-store".into())])
                .into_response())
        }
        None => stream(store, key, name, size).await,
    }
}

async fn stream(
    store: &Arc<dyn ArtifactStore>,
    key: &rara_artifacts::Key,
    name: &str,
    size: Option<i64>,
) -> Result<Response, Error> {
    let reader = store.get(key).await.map_err(unavailable)?;
    let mut response = Response::new(Body::from_stream(tokio_util::io::ReaderStream::new(reader)));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/octet-stream"));
    headers.insert(header::CACHE_CONTROL, header::HeaderValue::from_static("no-store"));
    // The name is A-Z a-z 0-9 . _ - when rara wrote it; any other is not put in a header.
    let safe = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    let disposition = if safe { format!("attachment; filename=\"{name}\"") } else { "attachment".to_owned() };
    if let Ok(value) = header::HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    if let Some(size) = size.filter(|s| *s >= 0) {
        headers.insert(header::CONTENT_LENGTH, header::HeaderValue::from(size));
    }
    Ok(response)
}

fn unavailable(e: rara_artifacts::Error) -> Error {
    match e {
        rara_artifacts::Error::NotFound { .. } => Error::not_found("the artifact's object is gone from the store"),
        e => {
            tracing::warn!(error = %e, "the artifact store is unavailable");
            Error::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "the artifact store is unavailable; try again",
                1,
            )
        }
    }
}
