//! `rara secrets grant|revoke|list` and what the grants decide, through the `rara` binary
//! (Postgres, LocalStack's SQS, the env backend `RARA_SECRET_<NAME>`): an ungranted reference
//! is refused at submit with its field path and the command that grants it; a granted one
//! resolves from the executor's environment; one revoked after submit fails its step at claim
//! with `SECRET_NOT_GRANTED`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use rara_testkit::Queues;

const VALUE: &str = "env-s3cret-93d1";

fn workflow(name: &str) -> String {
    format!("name: {name}\nsteps:\n  - {{name: a, operation: noop, input: {{token: {{$secret: api}}}}}}\n")
}

fn env(queues: &Queues) -> Vec<(&'static str, String)> {
    let mut env = stack_env(queues);
    env.push(("RARA_SECRET_API", VALUE.into()));
    env
}

fn ok(out: std::process::Output) -> String {
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    stdout(&out)
}

#[tokio::test]
async fn secrets_are_refused_until_granted_and_a_revoked_grant_fails_its_step_at_claim() {
    let queues = Queues::new(30, 10).await;
    let db = ScratchDb::new();
    ok(db.rara(&["migrate"]));
    let dir = tempdir();
    let (billing, weekly) =
        (write(&dir, "b.yaml", &workflow("billing-daily")), write(&dir, "w.yaml", &workflow("weekly")));

    let refused = db.rara(&["submit", &billing]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    let message = stderr(&refused);
    assert!(message.contains("steps[0].input.token: secret \"api\" is not granted"), "{message}");
    assert!(message.contains("rara secrets grant api --workflow billing-daily"), "{message}");
    assert_eq!(ok(db.rara(&["secrets", "list"])).lines().count(), 1, "no grants yet: one line saying so");

    let unscoped = db.rara(&["secrets", "grant", "api"]);
    assert_eq!(unscoped.status.code(), Some(2), "a grant names workflows or operations");
    ok(db.rara(&["secrets", "grant", "api", "--workflow", "billing-*"]));
    ok(db.rara(&["secrets", "grant", "api", "--workflow", "weekly", "--operation", "noop"]));
    let grants: serde_json::Value = serde_json::from_str(&ok(db.rara(&["secrets", "list", "--json"]))).unwrap();
    assert_eq!(grants.as_array().unwrap().len(), 2, "{grants}");
    assert_eq!(grants[0]["workflow"], "billing-*");

    let granted: String = ok(db.rara(&["submit", &billing])).trim().to_owned();
    let revoked: String = ok(db.rara(&["submit", &weekly])).trim().to_owned();
    ok(db.rara(&["secrets", "revoke", "api", "--workflow", "weekly", "--operation", "noop"]));
    let again = db.rara(&["secrets", "revoke", "api", "--workflow", "weekly", "--operation", "noop"]);
    assert_eq!(again.status.code(), Some(3), "{}", stderr(&again));

    let env = env(&queues);
    ok(db.rara_in(&env, &["scheduler", "--once"]));
    ok(db.rara_in(&env, &["executor", "--until-idle", "--idle-seconds", "2"]));
    let status =
        |id: &str| -> serde_json::Value { serde_json::from_str(&ok(db.rara(&["status", id, "--json"]))).unwrap() };
    assert_eq!(status(&granted)["status"], "succeeded");
    let failed = status(&revoked);
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["steps"][0]["error"]["code"], "SECRET_NOT_GRANTED", "{failed}");
    assert_eq!(failed["steps"][0]["error"]["retryable"], false);
    assert_eq!(failed["steps"][0]["attempt"], 1);
}
