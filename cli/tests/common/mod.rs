//! Support for the CLI tests: a scratch database per test and the `rara` binary run
//! against it (and, where a test gives them, LocalStack's queues).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

use uuid::Uuid;

/// A scratch database URL on the server of `DATABASE_URL` (dropped at the end of the test).
pub struct ScratchDb {
    pub url: String,
    admin: String,
    name: String,
}

impl ScratchDb {
    pub fn new() -> Self {
        let base =
            std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
        let (server, _) = base.rsplit_once('/').expect("DATABASE_URL has a database name");
        let name = format!("rara_cli_{}", Uuid::new_v4().simple());
        ScratchDb { url: format!("{server}/{name}"), admin: format!("{server}/postgres"), name }
    }

    pub fn rara(&self, args: &[&str]) -> Output {
        self.rara_with(args, &[])
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

impl Drop for ScratchDb {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .args([&self.admin, "-qc", &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name)])
            .output();
    }
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
