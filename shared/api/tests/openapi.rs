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

/// The API's routes as the router's source declares them: every `.route("/api/…", get(…).post(…))`
/// of `src/`, as (path, method) pairs.
fn routed() -> std::collections::BTreeSet<(String, String)> {
    fn files(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
            let path = entry.path();
            if path.is_dir() {
                files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut sources = Vec::new();
    files(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src"), &mut sources);
    let mut routes = std::collections::BTreeSet::new();
    for source in sources {
        let text = std::fs::read_to_string(&source).unwrap();
        for part in text.split(".route(\"").skip(1) {
            let (path, rest) = part.split_once('"').unwrap();
            // The handlers of this route: up to the next route or the end of the expression.
            let handlers = rest.split(".route(").next().unwrap().split(';').next().unwrap();
            if !path.starts_with("/api/") {
                continue;
            }
            for method in ["get", "post", "put", "patch", "delete"] {
                let called = handlers
                    .match_indices(&format!("{method}("))
                    .any(|(at, _)| at == 0 || !handlers[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_'));
                if called {
                    routes.insert((path.to_owned(), method.to_owned()));
                }
            }
        }
    }
    routes
}

#[test]
fn the_document_and_the_router_name_the_same_operations() {
    let document: serde_json::Value = serde_json::from_str(&rara_api::openapi::document()).unwrap();
    let documented: std::collections::BTreeSet<(String, String)> = document["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, methods)| methods.as_object().unwrap().keys().map(move |m| (path.clone(), m.clone())))
        .collect();
    let routed = routed();
    assert!(routed.len() > 30, "the router's source was read: {routed:?}");
    let missing: Vec<_> = routed.difference(&documented).collect();
    assert!(missing.is_empty(), "routed but not in docs/openapi.json: {missing:?}");
    let unrouted: Vec<_> = documented.difference(&routed).collect();
    assert!(unrouted.is_empty(), "in docs/openapi.json but not routed: {unrouted:?}");
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
