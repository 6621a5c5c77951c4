//! `rara --api URL`: the commands through a real `rara ui`, with the same output and exit codes
//! as over the database.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{ScratchDb, stderr, stdout};

const TOKEN: &str = "via-api-token";

struct Ui(Child);

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn rara(url: &str, token: Option<&str>, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rara"));
    command.arg("--api").arg(url).args(args).env_remove("DATABASE_URL").env("RARA_LOG", "warn");
    match token {
        Some(token) => command.env("RARA_API_TOKEN", token),
        None => command.env_remove("RARA_API_TOKEN"),
    };
    command.output().unwrap()
}

#[test]
fn commands_run_through_the_api_with_the_cli_exit_codes() {
    let db = ScratchDb::new();
    assert!(db.rara(&["migrate"]).status.success());
    let port = rara_testkit::python::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let _ui = Ui(Command::new(env!("CARGO_BIN_EXE_rara"))
        .args(["ui", "--bind", &format!("127.0.0.1:{port}"), "--token", TOKEN])
        .env("DATABASE_URL", &db.url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "rara ui did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    let demo = rara_testkit::repo_root().join("tests/fixtures/demo-four-steps.yaml");
    let demo = demo.to_str().unwrap();

    let refused = rara(&url, None, &["submit", demo]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(stderr(&refused).contains("401"), "{}", stderr(&refused));

    // A registered workflow by name, through the API: the newest version, inputs typed.
    assert!(db.rara(&["workflow", "register", demo]).status.success());
    let by_name = rara(&url, Some(TOKEN), &["submit", "--workflow", "demo", "--json"]);
    assert!(by_name.status.success(), "{}", stderr(&by_name));
    let by_name: serde_json::Value = serde_json::from_str(&stdout(&by_name)).unwrap();
    let shown = rara(&url, None, &["status", by_name["id"].as_str().unwrap()]);
    assert!(stdout(&shown).contains("demo@1"), "{}", stdout(&shown));
    let missing = rara(&url, Some(TOKEN), &["submit", "--workflow", "demo@9"]);
    assert_eq!(missing.status.code(), Some(3), "{}", stderr(&missing));

    let submitted = rara(&url, Some(TOKEN), &["submit", demo]);
    assert!(submitted.status.success(), "{}", stderr(&submitted));
    let run = stdout(&submitted).trim().to_owned();

    let listed = rara(&url, None, &["list", "--json"]);
    let runs: serde_json::Value = serde_json::from_str(&stdout(&listed)).unwrap();
    assert_eq!(runs[0]["id"], run.as_str());
    let table = rara(&url, None, &["status", &run]);
    assert!(stdout(&table).contains("flaky") && stdout(&table).contains("pending"), "{}", stdout(&table));

    let cancelled = rara(&url, Some(TOKEN), &["--json", "cancel", &run]);
    assert!(cancelled.status.success(), "{}", stderr(&cancelled));
    let cancelled: serde_json::Value = serde_json::from_str(&stdout(&cancelled)).unwrap();
    assert_eq!((cancelled["kind"].as_str(), cancelled["cancelled_steps"].as_u64()), (Some("run"), Some(4)));
    // Over the database, `rara status` of the same run says the same.
    assert!(stdout(&db.rara(&["status", &run])).contains("cancelled"));

    let missing = rara(&url, None, &["status", &uuid::Uuid::now_v7().to_string()]);
    assert_eq!(missing.status.code(), Some(3), "{}", stderr(&missing));
    let invalid = common::write(
        &common::tempdir(),
        "bad.yaml",
        "name: x\nsteps:\n  - {name: a, operation: noop, depends_on: [nobody]}\n",
    );
    let rejected = rara(&url, Some(TOKEN), &["submit", &invalid]);
    assert_eq!(rejected.status.code(), Some(4), "{}", stderr(&rejected));
    let unsupported = rara(&url, None, &["dlq", "list"]);
    assert_eq!(unsupported.status.code(), Some(2));
}
