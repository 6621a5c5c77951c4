//! The `api` binary's start: without a token and without the IAM declaration it refuses to
//! start, naming both settings, before it connects anything.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

/// The binary with a clean environment plus `vars`: its exit status and stderr.
fn start(vars: &[(&str, &str)]) -> (bool, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_api"));
    command.env_clear().env("PATH", std::env::var("PATH").unwrap_or_default());
    for (k, v) in vars {
        command.env(k, v);
    }
    let output = command.output().expect("run the api binary");
    (output.status.success(), String::from_utf8_lossy(&output.stderr).into_owned())
}

#[test]
fn without_a_token_or_the_iam_declaration_the_binary_refuses_to_start_naming_both() {
    let (ok, stderr) = start(&[]);
    assert!(!ok);
    assert!(stderr.contains("refusing to start open"), "{stderr}");
    assert!(stderr.contains(api::TOKEN_VAR) && stderr.contains("RARA_API_AUTH=iam"), "{stderr}");
}

#[test]
fn with_the_iam_declaration_the_binary_passes_the_auth_check() {
    // It stops later, for want of a database: what matters is that the policy let it on.
    let (ok, stderr) = start(&[(api::AUTH_VAR, "iam")]);
    assert!(!ok);
    assert!(!stderr.contains("refusing to start open"), "{stderr}");
    let (_, stderr) = start(&[(api::TOKEN_VAR, "behind-api-gateway")]);
    assert!(!stderr.contains("refusing to start open") && !stderr.contains("behind-api-gateway"), "{stderr}");
}
