//! Support for the CLI tests: a scratch database per test and the `rara` binary run
//! against it (and, where a test gives them, LocalStack's queues).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

use rara_testkit::scratch;
use uuid::Uuid;

/// A scratch database on the server of `DATABASE_URL`, not created (`rara migrate` creates
/// it), dropped at the end of the test ([`rara_testkit::scratch`]).
pub struct ScratchDb {
    pub url: String,
    db: scratch::ScratchDb,
}

impl ScratchDb {
    pub fn new() -> Self {
        let db = scratch::ScratchDb::on_server_of_env("rara_cli").expect("DATABASE_URL is a Postgres URL");
        ScratchDb { url: db.url.clone(), db }
    }

    pub fn rara(&self, args: &[&str]) -> Output {
        self.rara_with(args, &[])
    }

    /// Runs `rara` in the environment of a live local stack ([`stack_env`]).
    pub fn rara_in(&self, env: &[(&'static str, String)], args: &[&str]) -> Output {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        self.rara_with(args, &env)
    }

    /// Runs `rara` with extra environment variables.
    pub fn rara_with(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_rara"));
        command.args(args).env("DATABASE_URL", &self.url).env("RARA_LOG", "warn");
        for (k, v) in env {
            command.env(k, v);
        }
        command.output().expect("run rara")
    }
}

impl ScratchDb {
    /// The rows of a query (one text column) through `psql`.
    pub fn psql_rows(&self, sql: &str) -> Vec<String> {
        let out = Command::new("psql").args([self.url.as_str(), "-At", "-c", sql]).output().expect("run psql");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
    }
}

impl Drop for ScratchDb {
    fn drop(&mut self) {
        self.db.drop_blocking();
    }
}

/// The environment of a live local stack for `rara`: LocalStack's endpoint and credentials,
/// the queue and its DLQ, a fast scheduler poll.
pub fn stack_env(queues: &rara_testkit::Queues) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT_URL", rara_testkit::endpoint()),
        ("AWS_ACCESS_KEY_ID", "test".into()),
        ("AWS_SECRET_ACCESS_KEY", "test".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("RARA_QUEUE_URL", queues.url.clone()),
        ("RARA_DLQ_URL", queues.dlq_url.clone()),
        ("RARA_SCHEDULER_POLL_MS", "100".into()),
    ]
}

/// The standard output of a command that must succeed.
pub fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}", stderr(o));
    stdout(o)
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write fixture");
    path.to_string_lossy().into_owned()
}

pub fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("rara-cli-{}", Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}
