//! The committed `docs/openapi.json` is the document the code generates. After changing the
//! API: `RARA_WRITE_OPENAPI=1 cargo test -p rara-api --test openapi` rewrites it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

#[test]
fn the_committed_openapi_document_is_what_the_code_generates() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json");
    let generated = rara_api::openapi::document();
    if std::env::var_os("RARA_WRITE_OPENAPI").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/openapi.json is stale: run `RARA_WRITE_OPENAPI=1 cargo test -p rara-api --test openapi` and commit it"
    );
}

#[test]
fn the_document_names_every_resource_path_and_the_token() {
    let document: serde_json::Value = serde_json::from_str(&rara_api::openapi::document()).unwrap();
    for path in [
        "/api/runs",
        "/api/runs/{id}",
        "/api/runs/{id}/cancel",
        "/api/steps/{id}/cancel",
        "/api/steps/{id}/retry",
        "/api/bulk/cancel",
        "/api/runs/{id}/signals/{name}",
        "/api/events",
        "/api/waits",
        "/api/waits/{token}",
        "/api/runs/{id}/rerun",
        "/api/bulk/replay",
        "/api/bulk/retry",
        "/api/login",
        "/api/artifacts/{id}",
        "/api/workflows",
        "/api/workflows/{name}",
        "/api/workflows/validate",
        "/api/workflows/{name}/versions/{version}",
        "/api/workflows/{name}/runs",
        "/api/schedules",
        "/api/schedules/{name}",
        "/api/schedules/{name}/pause",
        "/api/schedules/{name}/resume",
        "/api/schedules/{name}/trigger",
        "/api/schedules/{name}/backfill",
    ] {
        assert!(document["paths"][path].is_object(), "{path} is missing");
    }
    assert_eq!(document["components"]["securitySchemes"]["token"]["scheme"], "bearer");
    assert!(document["components"]["schemas"]["ErrorBody"]["properties"]["exit_code"].is_object());
}

#[test]
fn every_operation_has_its_own_id() {
    // Generators (openapi-typescript, the TypeScript client's) name an operation by its id: two
    // operations with one id are one type, and a client that does not compile.
    let document: serde_json::Value = serde_json::from_str(&rara_api::openapi::document()).unwrap();
    let mut seen = std::collections::BTreeMap::new();
    for (path, methods) in document["paths"].as_object().unwrap() {
        for (method, operation) in methods.as_object().unwrap() {
            let id = operation["operationId"].as_str().unwrap_or_else(|| panic!("{method} {path} has no id"));
            if let Some(other) = seen.insert(id.to_owned(), format!("{method} {path}")) {
                panic!("{method} {path} and {other} share the operationId {id:?}");
            }
        }
    }
}
