//! The console in a real browser: Debian's headless Chromium driven over WebDriver
//! (chromedriver), against `rara ui` and `rara dev` running the demo (and an approval answered
//! from the inbox) with the real Python executor, Postgres and LocalStack's SQS.
//! `scripts/browser-env.sh` installs the browser (`make test` runs it first). Screenshots are
//! kept in `$CARGO_TARGET_DIR/console-artifacts/`; `RARA_WRITE_SCREENSHOT=1` also writes the run
//! page to `docs/console-run.png` and the inbox to `docs/console-inbox.png`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use common::ScratchDb;
use serde_json::{Value, json};

/// How long a page may take to reach what the test waits for (a bound, not a measurement).
const PATIENCE: Duration = Duration::from_secs(90);
const TOKEN: &str = "browser-test-token";

/// A child process killed at the end of the test.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(program: &str, args: &[&str], env: &[(&str, String)]) -> Running {
    let mut command = Command::new(program);
    command.args(args).stdout(Stdio::null()).stderr(Stdio::null());
    for (k, v) in env {
        command.env(k, v);
    }
    Running(command.spawn().unwrap_or_else(|e| panic!("cannot start {program}: {e} (run scripts/browser-env.sh)")))
}

fn artifacts() -> PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| rara_testkit::repo_root().join("target"));
    let dir = target.join("console-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A WebDriver session: the few commands the test needs, as JSON over HTTP.
struct Browser {
    http: reqwest::Client,
    session: String,
}

impl Browser {
    async fn start(driver: &str) -> Browser {
        let http = reqwest::Client::new();
        let capabilities = json!({"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1400,1000"]}}}});
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match http.post(format!("{driver}/session")).json(&capabilities).send().await {
                Ok(response) => {
                    let body: Value = response.json().await.unwrap();
                    let session = body["value"]["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {body}"));
                    return Browser { http, session: format!("{driver}/session/{session}") };
                }
                Err(_) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(200)).await,
                Err(e) => panic!("chromedriver does not answer: {e}"),
            }
        }
    }

    async fn command(&self, path: &str, body: Value) -> Value {
        let response = self.http.post(format!("{}{path}", self.session)).json(&body).send().await.unwrap();
        response.json::<Value>().await.unwrap()["value"].clone()
    }

    async fn goto(&self, url: &str) {
        self.command("/url", json!({"url": url})).await;
    }

    /// Runs a script in the page and returns its value.
    async fn exec(&self, script: &str) -> Value {
        self.command("/execute/sync", json!({"script": script, "args": []})).await
    }

    /// Waits until `script` returns `true`; panics with `what` and a screenshot otherwise.
    async fn wait_for(&self, what: &str, script: &str) {
        let deadline = Instant::now() + PATIENCE;
        while Instant::now() < deadline {
            if self.exec(script).await == json!(true) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        self.screenshot("timeout.png").await;
        panic!("the page never showed {what} (screenshot timeout.png in {})", artifacts().display());
    }

    async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.http.get(format!("{}/screenshot", self.session)).send().await.unwrap();
        let png: Value = png.json().await.unwrap();
        let bytes = base64::engine::general_purpose::STANDARD.decode(png["value"].as_str().unwrap()).unwrap();
        let path = artifacts().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    async fn accept_alert(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let answer = self.command("/alert/accept", json!({})).await;
            if answer.is_null() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no confirmation dialog appeared");
    }

    async fn quit(self) {
        let _ = self.http.delete(&self.session).send().await;
    }
}

/// A one-time login URL, asked for with the token (`POST /api/login`).
async fn login_url(http: &reqwest::Client, base: &str) -> String {
    let issued: Value =
        http.post(format!("{base}/api/login")).bearer_auth(TOKEN).send().await.unwrap().json().await.unwrap();
    issued["url"].as_str().unwrap_or_else(|| panic!("{issued}")).to_owned()
}

/// Submits the definition `yaml` through the API with the token; the run id.
async fn submit(http: &reqwest::Client, base: &str, yaml: &str) -> String {
    let submitted: Value = http
        .post(format!("{base}/api/runs"))
        .bearer_auth(TOKEN)
        .json(&json!({"definition": yaml}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    submitted["id"].as_str().unwrap_or_else(|| panic!("{submitted}")).to_owned()
}

fn free_port() -> u16 {
    rara_testkit::python::free_port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_the_demo_live_and_cancels_a_running_step() {
    let status = Command::new(rara_testkit::repo_root().join("scripts/browser-env.sh")).status().unwrap();
    assert!(status.success(), "scripts/browser-env.sh could not install chromium");
    rara_testkit::sqs_client().await; // LocalStack up
    let python = rara_testkit::python::PythonServer::start();
    let db = ScratchDb::new();
    assert!(db.rara(&["migrate"]).status.success());
    let rara = env!("CARGO_BIN_EXE_rara");
    let env = vec![
        ("DATABASE_URL", db.url.clone()),
        ("RARA_LOG", "warn".to_owned()),
        ("RARA_REMOTE_EXECUTORS", python.url().to_owned()),
        ("AWS_ENDPOINT_URL", rara_testkit::endpoint()),
        ("AWS_ACCESS_KEY_ID", "test".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
        ("AWS_REGION", "us-east-1".to_owned()),
    ];
    let queue = format!("rara-console-{}", uuid::Uuid::new_v4().simple());
    let _dev = spawn(rara, &["dev", "--queue-name", &queue], &env);
    let ui_port = free_port();
    let base = format!("http://127.0.0.1:{ui_port}");
    let _ui = spawn(rara, &["ui", "--bind", &format!("127.0.0.1:{ui_port}"), "--token", TOKEN], &env);
    let driver_port = free_port();
    let _driver = spawn("chromedriver", &[&format!("--port={driver_port}")], &[]);
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while http.get(format!("{base}/openapi.json")).send().await.is_err() {
        assert!(Instant::now() < deadline, "rara ui did not start");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Without the token, a state-changing request is refused and stores nothing.
    let demo = std::fs::read_to_string(rara_testkit::repo_root().join("tests/fixtures/demo-four-steps.yaml")).unwrap();
    let refused = http.post(format!("{base}/api/runs")).json(&json!({"definition": demo})).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    let listed: Value = http.get(format!("{base}/api/runs")).send().await.unwrap().json().await.unwrap();
    assert_eq!(listed["runs"], json!([]));

    // The demo, submitted through the API.
    let run = submit(&http, &base, &demo).await;

    let browser = Browser::start(&format!("http://127.0.0.1:{driver_port}")).await;
    browser.goto(&login_url(&http, &base).await).await; // the session cookie, never the token in a URL
    browser.goto(&format!("{base}/runs/{run}")).await;
    browser.wait_for("the run page", "return document.getElementById('dag') !== null").await;
    // A marker that a reload would erase: the page must change in place.
    browser.exec("window.__rara_marker = 'same page'; return true").await;
    browser
        .wait_for(
            "the run succeeded",
            "return document.querySelector('#run-status .badge').dataset.status === 'succeeded'",
        )
        .await;
    assert_eq!(browser.exec("return window.__rara_marker").await, json!("same page"), "the page was reloaded");
    // The Content-Security-Policy admits the page's own stylesheet (by its hash): a succeeded
    // badge is green (#16a34a), not the default grey.
    let colour =
        browser.exec("return getComputedStyle(document.querySelector('#run-status .badge')).backgroundColor").await;
    assert_eq!(colour, json!("rgb(22, 163, 74)"), "the stylesheet applies under the CSP");
    let dag = browser
        .exec("return [...document.querySelectorAll('#dag .step')].map(g => g.dataset.step + '=' + g.dataset.status)")
        .await;
    assert_eq!(dag, json!(["prepare=succeeded", "flaky=succeeded", "stats=succeeded", "wait=succeeded"]));
    let flaky = browser
        .exec(
            "return [...document.querySelectorAll('#timeline .attempt[data-step=flaky]')].map(a => a.dataset.outcome)",
        )
        .await;
    assert_eq!(flaky, json!(["retrying", "succeeded"]), "the retry is on the timeline");
    let shot = browser.screenshot("console-run.png").await;
    if std::env::var_os("RARA_WRITE_SCREENSHOT").is_some() {
        std::fs::copy(&shot, rara_testkit::repo_root().join("docs/console-run.png")).unwrap();
    }

    // A long step, cancelled from its page while it runs.
    let long = "name: long\nsteps:\n  - name: nap\n    operation: sleep\n    input: {seconds: 50}\n";
    let long_run = submit(&http, &base, long).await;
    browser.goto(&format!("{base}/runs/{long_run}")).await;
    browser
        .wait_for(
            "the step running",
            "return document.querySelector('#dag .step[data-step=nap]').dataset.status === 'running'",
        )
        .await;
    browser.exec("document.querySelector('button.cancel-step[data-step=nap]').click(); return true").await;
    browser.accept_alert().await;
    browser
        .wait_for(
            "the step cancelled",
            "return document.querySelector('#dag .step[data-step=nap]')?.dataset.status === 'cancelled'",
        )
        .await;
    browser
        .wait_for(
            "the run cancelled",
            "return document.querySelector('#run-status .badge').dataset.status === 'cancelled'",
        )
        .await;
    browser.screenshot("console-cancelled.png").await;

    // An approval answered from the inbox: a payload that fails the wait's schema is refused
    // with the field, the right one completes the step and the run finishes.
    let approval = "name: approval\nsteps:\n  - name: approve\n    wait: {signal: approve, schema: {type: object, \
                    required: [approved_by]}}\n  - {name: after, operation: noop, depends_on: [approve]}\n";
    let approval_run = submit(&http, &base, approval).await;
    browser.goto(&format!("{base}/waits")).await;
    let row = "document.querySelector('tr.wait[data-step=approve]')";
    browser.wait_for("the waiting step in the inbox", &format!("return {row} !== null")).await;
    assert_eq!(browser.exec(&format!("return {row}.dataset.run")).await, json!(approval_run));
    let answer = |payload: &str| {
        format!(
            "const f = {row}.querySelector('form.approve'); f.querySelector('textarea').value = '{payload}'; \
             f.querySelector('button').click(); return true"
        )
    };
    browser.exec(&answer(r#"{"by":"ana"}"#)).await;
    browser.accept_alert().await;
    browser.wait_for("the refusal", "return document.getElementById('refused') !== null").await;
    let refused = browser.exec("return document.getElementById('refused').textContent").await;
    assert!(refused.as_str().unwrap().contains("approved_by"), "the refusal names the field: {refused}");
    browser.wait_for("the step still in the inbox", &format!("return {row} !== null")).await;
    let shot = browser.screenshot("console-inbox.png").await;
    if std::env::var_os("RARA_WRITE_SCREENSHOT").is_some() {
        std::fs::copy(&shot, rara_testkit::repo_root().join("docs/console-inbox.png")).unwrap();
    }
    browser.exec(&answer(r#"{"approved_by":"ana"}"#)).await;
    browser.accept_alert().await;
    browser.wait_for("what the form changed", "return document.getElementById('done') !== null").await;
    let done = browser.exec("return document.getElementById('done').textContent").await;
    assert!(done.as_str().unwrap().contains("delivered"), "{done}");
    browser.screenshot("console-inbox-done.png").await;
    browser.goto(&format!("{base}/runs/{approval_run}")).await;
    browser
        .wait_for(
            "the approved run succeeded",
            "return document.querySelector('#run-status .badge').dataset.status === 'succeeded'",
        )
        .await;
    let output: Value = http
        .get(format!("{base}/api/runs/{approval_run}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let approve = output["steps"].as_array().unwrap().iter().find(|s| s["name"] == "approve").unwrap();
    assert_eq!(approve["output"], json!({"approved_by": "ana"}), "{output}");

    // A form without the CSRF token is refused, even with the session.
    let no_redirect = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let opened = no_redirect.get(login_url(&http, &base).await).send().await.unwrap();
    let session = opened.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_owned();
    let forged = http
        .post(format!("{base}/runs/{run}/cancel"))
        .header("cookie", session)
        .header("content-type", "application/x-www-form-urlencoded")
        .body("csrf=forged")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    browser.quit().await;
}
