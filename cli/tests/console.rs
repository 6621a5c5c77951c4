//! The console in a real browser: Debian's headless Chromium driven over WebDriver
//! (chromedriver), against `rara ui` and `rara dev` running the demo (and an approval answered
//! from the inbox) with the real Python executor, Postgres and LocalStack's SQS.
//! `scripts/browser-env.sh` installs the browser (`make test` runs it first). Screenshots are
//! kept in `$CARGO_TARGET_DIR/console-artifacts/`; `RARA_WRITE_SCREENSHOT=1` also writes the
//! book's pictures: `docs/console-run.png` (a run with a map), `console-overview.png`,
//! `console-step.png` (a step's panel), `console-inbox.png`, `console-schedules.png`,
//! `console-limits.png` and `console-dlq.png`. After the demo, a run whose `stats` is a map, the
//! overview, a step's panel checked against the database, the keyboard alone, every action of
//! `/schedules` and `/limits` once, each checked in the database, and `/dlq` over real messages.
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
/// WebDriver's key codes.
const TAB: &str = "\u{E004}";
const ENTER: &str = "\u{E007}";

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

    /// Emulates the system's dark (or light) colour scheme through Chromium's DevTools.
    async fn color_scheme(&self, scheme: &str) {
        let features = json!([{"name": "prefers-color-scheme", "value": scheme}]);
        let params = json!({"cmd": "Emulation.setEmulatedMedia", "params": {"features": features}});
        self.command("/goog/cdp/execute", params).await;
    }

    /// Runs an asynchronous script (its last argument is the callback) and returns its value.
    async fn exec_async(&self, script: &str) -> Value {
        self.command("/execute/async", json!({"script": script, "args": []})).await
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

    /// A real click (WebDriver's element click: scrolled into view, at the element's centre).
    async fn click(&self, css: &str) {
        let found = self.command("/element", json!({"using": "css selector", "value": css})).await;
        let id = found["element-6066-11e4-a52e-4f735466cecf"].as_str().unwrap_or_else(|| panic!("no {css}: {found}"));
        let clicked = self.command(&format!("/element/{id}/click"), json!({})).await;
        assert!(clicked.is_null(), "clicking {css}: {clicked}");
    }

    /// Presses a key (a WebDriver key code: `TAB`, `ENTER`) as a keyboard would.
    async fn press(&self, key: &str) {
        let actions = json!({"actions": [{"type": "key", "id": "keyboard",
            "actions": [{"type": "keyDown", "value": key}, {"type": "keyUp", "value": key}]}]});
        self.command("/actions", actions).await;
    }

    /// Presses Tab until the focused element matches `css` (at most `bound` times); panics with
    /// a screenshot otherwise.
    async fn tab_to(&self, css: &str, bound: usize) {
        let focused = format!("return document.activeElement?.matches(\"{css}\") === true");
        for _ in 0..bound {
            self.press(TAB).await;
            if self.exec(&focused).await == json!(true) {
                return;
            }
        }
        self.screenshot("tab.png").await;
        panic!("{bound} presses of Tab never reached {css}");
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

/// `rara ui` (with `env`) and chromedriver running, the API answering, a browser session open.
struct Console {
    base: String,
    http: reqwest::Client,
    browser: Browser,
    _ui: Running,
    _driver: Running,
}

impl Console {
    async fn start(env: &[(&str, String)]) -> Console {
        let ui_port = free_port();
        let base = format!("http://127.0.0.1:{ui_port}");
        let bind = format!("127.0.0.1:{ui_port}");
        let _ui = spawn(env!("CARGO_BIN_EXE_rara"), &["ui", "--bind", &bind, "--token", TOKEN], env);
        let driver_port = free_port();
        let _driver = spawn("chromedriver", &[&format!("--port={driver_port}")], &[]);
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while http.get(format!("{base}/openapi.json")).send().await.is_err() {
            assert!(Instant::now() < deadline, "rara ui did not start");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let browser = Browser::start(&format!("http://127.0.0.1:{driver_port}")).await;
        Console { base, http, browser, _ui, _driver }
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
    let sqs = rara_testkit::sqs_client().await; // LocalStack up
    // The artifact store is a bucket on LocalStack's S3, as a deployment's: the console's
    // artifact links redirect to a presigned URL there.
    let (_, artifacts_uri) = rara_testkit::s3_store("console").await;
    let endpoint = rara_testkit::endpoint();
    let python = rara_testkit::python::PythonServer::start_with_env(
        0,
        &[
            ("RARA_ARTIFACTS_URI", &artifacts_uri),
            ("AWS_ENDPOINT_URL", &endpoint),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
        ],
    );
    let db = ScratchDb::new();
    assert!(db.rara(&["migrate"]).status.success());
    let rara = env!("CARGO_BIN_EXE_rara");
    let env = vec![
        ("DATABASE_URL", db.url.clone()),
        ("RARA_LOG", "warn".to_owned()),
        ("RARA_REMOTE_EXECUTORS", python.url().to_owned()),
        ("AWS_ENDPOINT_URL", endpoint.clone()),
        ("AWS_ACCESS_KEY_ID", "test".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
        ("AWS_REGION", "us-east-1".to_owned()),
        // The Python executor's store (its artifacts), served by the console; an output beyond
        // 2 KiB goes there too, by reference (the step panel's run).
        ("RARA_ARTIFACTS_URI", artifacts_uri.clone()),
        ("RARA_INLINE_OUTPUT_BYTES", "2048".to_owned()),
    ];
    // A test's queue name, so that the IAM check reads it (and its DLQ) as the template's queues.
    let queue = format!("{}console-{}", rara_platform::call_log::TEST_QUEUE_PREFIX, uuid::Uuid::new_v4().simple());
    let _dev = spawn(rara, &["dev", "--queue-name", &queue], &env);
    // `rara ui` reads the DLQ `rara dev` made (its `/dlq` page), once it exists.
    let (queue_url, dlq_url) = queue_urls(&sqs, &queue).await;
    let mut ui_env = env.clone();
    ui_env.extend([("RARA_QUEUE_URL", queue_url.clone()), ("RARA_DLQ_URL", dlq_url.clone())]);
    let Console { base, http, browser, _ui, _driver } = Console::start(&ui_env).await;

    // Without the token, a state-changing request is refused and stores nothing.
    let demo = std::fs::read_to_string(rara_testkit::repo_root().join("tests/fixtures/demo-four-steps.yaml")).unwrap();
    let refused = http.post(format!("{base}/api/runs")).json(&json!({"definition": demo})).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    let listed: Value = http.get(format!("{base}/api/runs")).send().await.unwrap().json().await.unwrap();
    assert_eq!(listed["runs"], json!([]));

    // The demo, submitted through the API.
    let run = submit(&http, &base, &demo).await;

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
    // badge is green (#15803d), not the default grey.
    let colour =
        browser.exec("return getComputedStyle(document.querySelector('#run-status .badge')).backgroundColor").await;
    assert_eq!(colour, json!("rgb(21, 128, 61)"), "the stylesheet applies under the CSP");
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
    browser.screenshot("console-run-demo.png").await;

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
    // Waiting first (read in the database): this part is about the inbox's form; live updates
    // after several live pages are `live_pages_left_behind_leave_the_next_page_live`'s.
    let waiting = format!("SELECT status::text FROM steps WHERE run_id = '{approval_run}' AND name = 'approve'");
    let deadline = Instant::now() + PATIENCE;
    while db.psql_rows(&waiting) != ["waiting"] {
        assert!(Instant::now() < deadline, "the approval step never waited: {:?}", db.psql_rows(&waiting));
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
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
    publish(&browser.screenshot("console-inbox.png").await, "console-inbox.png");
    accessible(&browser, "inbox").await;
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

    map_run(&browser, &http, &base).await;
    let panel_run = step_panel(&browser, &http, &base, &db).await;
    keyboard(&browser, &base, &db, &panel_run).await;
    operator_pages(&browser, &http, &base, &db).await;
    let dlq = rara_queue::sqs::SqsQueue::new(sqs, queue_url, Some(dlq_url.clone()));
    dlq_page(&browser, &base, &db, (&dlq, &dlq_url), &run).await;
    browser.quit().await;
}

/// Runs axe-core (installed by `scripts/browser-env.sh`) on the page and fails on any serious or
/// critical violation, naming the rule and the first elements.
async fn accessible(browser: &Browser, page: &str) {
    let axe = dirs_axe();
    let source =
        std::fs::read_to_string(&axe).unwrap_or_else(|e| panic!("{}: {e} (run scripts/browser-env.sh)", axe.display()));
    browser.exec(&format!("{source}; return true")).await;
    let found = browser
        .exec_async(
            "const done = arguments[arguments.length - 1]; \
             axe.run(document, {resultTypes: ['violations']}).then(r => done(r.violations \
               .filter(v => v.impact === 'serious' || v.impact === 'critical') \
               .map(v => v.id + ' (' + v.impact + '): ' + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(', ')))) \
             .catch(e => done(['axe failed: ' + e]));",
        )
        .await;
    assert_eq!(found, json!([]), "{page}: serious or critical accessibility violations");
}

/// Where `scripts/browser-env.sh` installs axe-core.
fn dirs_axe() -> PathBuf {
    let cache = std::env::var("HOME").map(PathBuf::from).unwrap_or_default().join(".cache/rara/axe");
    cache.join("node_modules/axe-core/axe.min.js")
}

/// Copies a screenshot into `docs/` when `RARA_WRITE_SCREENSHOT` is set (the book's pictures).
fn publish(shot: &std::path::Path, name: &str) {
    if std::env::var_os("RARA_WRITE_SCREENSHOT").is_some() {
        std::fs::copy(shot, rara_testkit::repo_root().join("docs").join(name)).unwrap();
    }
}

/// The demo's shape with `stats` a map over four paragraphs: its children are drawn in its frame,
/// under it, after `prepare`'s column; then the landing page's overview counts what ran.
async fn map_run(browser: &Browser, http: &reqwest::Client, base: &str) {
    let yaml = "name: demo-map\nsteps:\n  - {name: prepare, operation: noop}\n  - name: flaky\n    operation: fail\n    \
                input: {fail_attempts: 1, retryable: true}\n    depends_on: [prepare]\n    max_attempts: 3\n    \
                retry: {initial_delay_seconds: 1, max_delay_seconds: 2}\n  - name: stats\n    operation: text.stats\n    \
                version: '1.0.0'\n    for_each: [rara leases steps, in Postgres, and delivers them, over SQS]\n    \
                input: {text: {$item: ''}, top: 3}\n    depends_on: [prepare]\n  - {name: merge, operation: noop, \
                depends_on: [stats]}\n  - {name: wait, operation: noop, depends_on: [flaky, merge]}\n";
    let run = submit(http, base, yaml).await;
    browser.goto(&format!("{base}/runs/{run}")).await;
    browser
        .wait_for(
            "the map run succeeded",
            "return document.querySelector('#run-status .badge').dataset.status === 'succeeded'",
        )
        .await;
    let geometry = browser
        .exec(
            "const box = e => { const r = e.getBBox(); return [r.x, r.y, r.x + r.width, r.y + r.height]; }; \
             const node = s => box(document.querySelector(`#dag .step[data-step=\"${s}\"] rect`)); \
             return { frame: box(document.querySelector('#dag rect.map-group')), stats: node('stats'), \
                      prepare: node('prepare'), children: [...document.querySelectorAll('#dag .step[data-parent=stats]')] \
                      .map(g => box(g.querySelector('rect'))) }",
        )
        .await;
    let at = |v: &Value, i: usize| v[i].as_f64().unwrap();
    let (frame, stats, prepare) = (&geometry["frame"], &geometry["stats"], &geometry["prepare"]);
    let children = geometry["children"].as_array().unwrap();
    assert_eq!(children.len(), 4, "stats[0..3] are drawn: {geometry}");
    assert!(at(stats, 0) > at(prepare, 2), "stats is after prepare's column: {geometry}");
    for child in children {
        assert!(at(child, 0) >= at(stats, 0) && at(child, 1) > at(stats, 1), "a child under stats: {geometry}");
        assert!(
            at(child, 0) >= at(frame, 0) && at(child, 2) <= at(frame, 2) && at(child, 3) <= at(frame, 3),
            "a child inside stats's frame: {geometry}"
        );
    }
    publish(&browser.screenshot("console-run.png").await, "console-run.png");
    accessible(browser, "run page").await;

    browser.goto(&format!("{base}/")).await;
    browser.wait_for("the overview", "return document.getElementById('overview') !== null").await;
    let operations = browser
        .exec("return [...document.querySelectorAll('#operations tr[data-operation]')].map(r => r.dataset.operation)")
        .await;
    assert!(operations.as_array().unwrap().contains(&json!("text.stats")), "{operations}");
    let failed = browser.exec("return document.querySelector('#errors tr[data-code]')?.dataset.code").await;
    assert!(failed.is_string(), "the retried attempts' error code is listed: {failed}");
    publish(&browser.screenshot("console-overview.png").await, "console-overview.png");
    accessible(browser, "overview").await;
}

/// Clicks `selector` (a form's button), accepts its confirmation and waits for the answer's
/// `#done` panel to say `expected`.
async fn act(browser: &Browser, selector: &str, expected: &str) {
    browser.exec(&format!("document.querySelector('{selector}').click(); return true")).await;
    browser.accept_alert().await;
    let said = format!("return document.getElementById('done')?.textContent.includes('{expected}') === true");
    browser.wait_for(expected, &said).await;
}

/// `/schedules` and `/limits`: each action once, its effect read from the database.
async fn operator_pages(browser: &Browser, http: &reqwest::Client, base: &str, db: &ScratchDb) {
    let workflow = json!({"definition": "name: nightly\nsteps: [{name: index, operation: noop}]\n"});
    let made = http.post(format!("{base}/api/workflows")).bearer_auth(TOKEN).json(&workflow).send().await.unwrap();
    assert_eq!(made.status(), 201);
    let schedule = json!({"name": "nightly-index", "workflow": "nightly", "every_seconds": 3600});
    let made = http.post(format!("{base}/api/schedules")).bearer_auth(TOKEN).json(&schedule).send().await.unwrap();
    assert_eq!(made.status(), 201);

    browser.goto(&format!("{base}/")).await;
    browser.exec("document.querySelector('a[href=\"/schedules\"]').click(); return true").await;
    browser.wait_for("the schedules", "return document.querySelector('tr.schedule') !== null").await;
    act(browser, "button.pause[data-name=nightly-index]", "is now paused").await;
    assert_eq!(db.psql_rows("SELECT paused FROM schedules WHERE name = 'nightly-index'"), ["t"]);
    act(browser, "button.trigger[data-name=nightly-index]", "triggered").await;
    let said = browser.exec("return document.querySelector('#done a').getAttribute('href')").await;
    let triggered = said.as_str().unwrap().trim_start_matches("/runs/").to_owned();
    assert_eq!(db.psql_rows(&format!("SELECT name FROM workflow_runs WHERE id = '{triggered}'")), ["nightly"]);
    publish(&browser.screenshot("console-schedules.png").await, "console-schedules.png");
    accessible(browser, "schedules").await;
    act(browser, "button.resume[data-name=nightly-index]", "is now active").await;
    assert_eq!(db.psql_rows("SELECT paused FROM schedules WHERE name = 'nightly-index'"), ["f"]);

    browser.exec("document.querySelector('a[href=\"/limits\"]').click(); return true").await;
    browser.wait_for("the limits", "return document.getElementById('set-limit') !== null").await;
    let fill = "const f = document.getElementById('set-limit'); f.target.value = 'tenant-*'; f.limit.value = '3'; \
                f.rate.value = '50/s'; return true";
    browser.exec(fill).await;
    act(browser, "#set-limit button", "now limit 3, rate 50/s").await;
    assert_eq!(db.psql_rows("SELECT max_held, rate_count FROM flow_limits WHERE target = 'tenant-*'"), ["3|50"]);
    browser.exec("const f = document.getElementById('pause'); f.kind.value = 'key'; f.target.value = 'tenant-b'; return true").await;
    act(browser, "#pause button", "Paused key tenant-b").await;
    assert_eq!(db.psql_rows("SELECT kind || ' ' || target FROM flow_pauses"), ["key tenant-b"]);
    publish(&browser.screenshot("console-limits.png").await, "console-limits.png");
    accessible(browser, "limits").await;
    // The dark theme follows the system's setting, and passes the same check.
    browser.color_scheme("dark").await;
    let background = browser.exec("return getComputedStyle(document.body).backgroundColor").await;
    assert_eq!(background, json!("rgb(11, 17, 32)"), "the dark theme applies");
    publish(&browser.screenshot("console-limits-dark.png").await, "console-limits-dark.png");
    accessible(browser, "limits, dark").await;
    browser.color_scheme("light").await;
    act(browser, "button.resume[data-target=tenant-b]", "Resumed key tenant-b").await;
    assert!(db.psql_rows("SELECT target FROM flow_pauses").is_empty());
    act(browser, r#"button.unset[data-target=\"tenant-*\"]"#, "now no limit").await;
    assert!(db.psql_rows("SELECT target FROM flow_limits").is_empty());
}

/// A step's panel, opened by a click on its node: its input as stored and resolved, its output
/// stored by reference with a link that downloads it, its attempts with their fences, and its
/// artifact with a link that downloads it for the session (and not without one); each checked
/// against the database. The timeline marks the step's attempts.
async fn step_panel(browser: &Browser, http: &reqwest::Client, base: &str, db: &ScratchDb) -> String {
    let yaml = "name: panel\ninputs: {text: {type: string}}\nsteps:\n  - name: count\n    operation: text.stats\n    \
                version: '1.0.0'\n    input: {text: {$input: /text}, top: 400}\n  - name: report\n    operation: noop\n    \
                depends_on: [count]\n    input: {words: {$output: count, pointer: /words}}\n";
    let text: Vec<String> = (0..400).map(|i| format!("word{i:03}")).collect();
    let body = json!({"definition": yaml, "inputs": {"text": text.join(" ")}});
    let submitted: Value = http
        .post(format!("{base}/api/runs"))
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let run = submitted["id"].as_str().unwrap_or_else(|| panic!("{submitted}")).to_owned();
    // Finished first (read through the API): this part is about the panel, not live updates.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let shown: Value = http.get(format!("{base}/api/runs/{run}")).send().await.unwrap().json().await.unwrap();
        if shown["status"] == "succeeded" {
            break;
        }
        assert!(Instant::now() < deadline, "the panel's run did not succeed: {}", shown["status"]);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    browser.goto(&format!("{base}/runs/{run}")).await;
    browser
        .wait_for(
            "the run succeeded",
            "return document.querySelector('#run-status .badge').dataset.status === 'succeeded'",
        )
        .await;
    browser.exec("window.__rara_marker = 'same page'; return true").await;
    browser.click("#dag a.select[href*='step=count']").await;
    browser
        .wait_for("the step's panel", "return document.querySelector('#step-panel')?.dataset.step === 'count'")
        .await;
    assert_eq!(browser.exec("return window.__rara_marker").await, json!("same page"), "selected without a reload");
    assert!(browser.exec("return location.search").await.as_str().unwrap().contains("step=count"), "in the address");

    let step = format!("(SELECT id FROM steps WHERE run_id = '{run}' AND name = 'count')");
    let panel = browser
        .exec(
            "const p = document.getElementById('step-panel'); const t = s => p.querySelector(s)?.textContent; \
             return {stored: t('#input-stored'), resolved: t('#input-resolved'), output: t('#output-stored'), \
                     download: p.querySelector('#output-download')?.getAttribute('href'), \
                     fences: [...p.querySelectorAll('#attempts td.fence')].map(td => td.textContent), \
                     artifacts: [...p.querySelectorAll('#artifacts a.download')].map(a => a.getAttribute('href')), \
                     timeline: [...document.querySelectorAll('#timeline .attempt[data-selected]')].map(g => g.dataset.step)}",
        )
        .await;
    assert!(panel["stored"].as_str().unwrap().contains("\"$input\": \"/text\""), "the input as stored: {panel}");
    assert!(panel["resolved"].as_str().unwrap().contains("word399"), "the resolved input: {panel}");
    let uri = db.psql_rows(&format!("SELECT output->'$stored'->>'uri' FROM steps WHERE id = {step}"));
    assert!(panel["output"].as_str().unwrap().contains(&uri[0]), "the output's reference {uri:?}: {panel}");
    let fences = db.psql_rows(&format!("SELECT fence FROM step_attempts WHERE step_id = {step} ORDER BY attempt"));
    assert_eq!(panel["fences"], json!(fences), "the attempts and their fences");
    let ids =
        db.psql_rows(&format!("SELECT '/api/artifacts/' || id FROM artifacts WHERE step_id = {step} ORDER BY id"));
    assert_eq!(panel["artifacts"], json!(ids), "the artifacts, each with its link");
    assert_eq!(panel["timeline"], json!(["count"]), "the timeline marks the step's attempts");
    publish(&browser.screenshot("console-step.png").await, "console-step.png");
    accessible(browser, "run page with a step's panel").await;

    // Both links download for the session, each a redirect to a presigned URL of the bucket
    // that the browser follows without rara's session or any AWS credential: the output (JSON,
    // its words) and the artifact (the Python step's JSON, whole).
    let rows = db.psql_rows(&format!("SELECT uri || ' ' || size_bytes FROM artifacts WHERE step_id = {step}"));
    let (uri, size) = rows[0].split_once(' ').unwrap();
    assert!(uri.starts_with("s3://"), "the artifact is in the bucket: {uri}");
    let output: Value =
        serde_json::from_str(&presigned(browser, base, panel["download"].as_str().unwrap()).await).unwrap();
    assert_eq!(output["words"], json!(400), "what the output's link downloads");
    let artifact = presigned(browser, base, &ids[0]).await;
    assert_eq!(artifact.len(), size.parse::<usize>().unwrap(), "the object downloaded whole: {artifact:.200}");
    assert!(serde_json::from_str::<Value>(&artifact).is_ok(), "the Python step's JSON: {artifact:.200}");
    let anonymous = reqwest::get(format!("{base}{}", ids[0])).await.unwrap();
    assert_eq!(anonymous.status(), 401, "not without a session");

    // Without script, the node is a link to the same page with the panel.
    let page = http.get(format!("{base}/runs/{run}?step=report")).send().await.unwrap().text().await.unwrap();
    assert!(page.contains(r#"id="step-panel""#) && page.contains(r#"data-step="report""#), "the panel without script");
    run
}

/// Opens `link` (a path of the console) in the browser: it must land on a presigned URL (not on
/// `base`); the JSON text the browser shows there.
async fn presigned(browser: &Browser, base: &str, link: &str) -> String {
    browser.goto(&format!("{base}{link}")).await;
    let opened = browser
        .exec("return {href: location.href, text: (document.querySelector('pre') || document.body).textContent}")
        .await;
    let href = opened["href"].as_str().unwrap();
    assert!(href.contains("X-Amz-Signature=") && !href.starts_with(base), "{link}: not a presigned URL: {href}");
    opened["text"].as_str().unwrap().to_owned()
}

/// The keyboard alone: Tab through the overview to a run's link (its focus visible) and open
/// it with Enter; on the run page Tab to a step's node, open its panel with Enter, Tab to its
/// rerun button and press it (the rerun is in the database).
async fn keyboard(browser: &Browser, base: &str, db: &ScratchDb, run: &str) {
    const FOCUS: &str = "rgb(245, 158, 11)";
    browser.goto(&format!("{base}/")).await;
    browser.wait_for("the overview", "return document.getElementById('overview') !== null").await;
    let link = format!("#runs a[href='/runs/{run}']");
    browser.tab_to(&link, 80).await;
    let outline = browser
        .exec("const s = getComputedStyle(document.activeElement); return [s.outlineStyle, s.outlineColor]")
        .await;
    assert_eq!(outline, json!(["solid", FOCUS]), "the focused link is outlined");
    browser.press(ENTER).await;
    browser.wait_for("the run page", "return document.getElementById('dag') !== null").await;

    browser.tab_to("#dag a.select[href*='step=report']", 40).await;
    let stroke = browser.exec("return getComputedStyle(document.activeElement.querySelector('rect')).stroke").await;
    assert_eq!(stroke, json!(FOCUS), "the focused node is outlined");
    browser.screenshot("console-keyboard-node.png").await;
    browser.press(ENTER).await;
    browser.wait_for("the panel", "return document.querySelector('#step-panel')?.dataset.step === 'report'").await;
    browser
        .wait_for(
            "the focus in the panel",
            "return document.getElementById('step-panel').contains(document.activeElement)",
        )
        .await;
    browser.tab_to("#step-panel button.rerun-step", 10).await;
    browser.press(ENTER).await;
    browser.accept_alert().await;
    browser
        .wait_for(
            "the rerun's page",
            &format!("return location.pathname.startsWith('/runs/') && !location.pathname.includes('{run}')"),
        )
        .await;
    let reruns = db.psql_rows(&format!("SELECT count(*) FROM workflow_runs WHERE rerun_of = '{run}'"));
    assert_eq!(reruns, ["1"], "the rerun, made from the keyboard");
}

/// The step queue's and the DLQ's URLs, once `rara dev` has made them.
async fn queue_urls(sqs: &aws_sdk_sqs::Client, queue: &str) -> (String, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let url = |name: String| async move { sqs.get_queue_url().queue_name(name).send().await.ok()?.queue_url };
        if let (Some(queue), Some(dlq)) = (url(queue.to_owned()).await, url(format!("{queue}-dlq")).await) {
            return (queue, dlq);
        }
        assert!(Instant::now() < deadline, "rara dev made no queue {queue}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `/dlq` over the DLQ `rara dev` made: a stale message (its step of the demo finished) and
/// rara's own dead-letter, real messages on LocalStack's SQS; purge removes the stale one,
/// redrive sends the other back to the step queue, each confirmed first.
async fn dlq_page(
    browser: &Browser,
    base: &str,
    db: &ScratchDb,
    (queue, dlq_url): (&rara_queue::sqs::SqsQueue, &str),
    run: &str,
) {
    use rara_queue::Queue;
    let step = db.psql_rows(&format!("SELECT id FROM steps WHERE run_id = '{run}' AND name = 'prepare'"));
    let stale = format!(r#"{{"v":1,"step_id":"{}","lease_token":"{}"}}"#, step[0], uuid::Uuid::new_v4());
    queue.client().send_message().queue_url(dlq_url).message_body(&stale).send().await.unwrap();
    queue.dead_letter("not a step message", "MALFORMED_MESSAGE", "not JSON").await.unwrap();

    browser.goto(&format!("{base}/")).await;
    browser.click("a[href='/dlq']").await;
    let rows = "return [...document.querySelectorAll('#dead-letters tr.entry')].map(r => r.dataset.state).sort()";
    browser.wait_for("both entries", &format!("{rows}.join() === 'rejected,stale'")).await;
    publish(&browser.screenshot("console-dlq.png").await, "console-dlq.png");
    accessible(browser, "dlq").await;
    act(browser, "button.purge", "Removed 1 stale message(s) from the DLQ; 1 other(s) stay.").await;
    assert_eq!(browser.exec(rows).await, json!(["rejected"]), "the page after the purge");
    act(browser, "button.redrive", "Moved 1 message(s) back to the step queue.").await;
}

/// A browser holds six connections to an HTTP/1.1 origin. Live pages left behind (kept for
/// "back" by the browser, their streams open) once took them all: the sixth live page opened
/// in a row waited 60 s for a connection (measured: 0.1 s per page before it), and a page
/// opened after several live ones rendered late and missed updates. Eight live pages are
/// opened one after the other, each must load without waiting for a connection (a bound far
/// above a load, far below the stall); then the runs list, whose stream must still deliver: a
/// run submitted afterwards appears without a reload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_pages_left_behind_leave_the_next_page_live() {
    const STALLED: Duration = Duration::from_secs(20);
    let status = Command::new(rara_testkit::repo_root().join("scripts/browser-env.sh")).status().unwrap();
    assert!(status.success(), "scripts/browser-env.sh could not install chromium");
    let db = ScratchDb::new();
    assert!(db.rara(&["migrate"]).status.success());
    let env = [("DATABASE_URL", db.url.clone()), ("RARA_LOG", "warn".to_owned())];
    let Console { base, http, browser, _ui, _driver } = Console::start(&env).await;
    let pending = "name: pending\nsteps:\n  - {name: one, operation: noop}\n";
    browser.goto(&login_url(&http, &base).await).await;
    let mut pages = Vec::new();
    for _ in 0..8 {
        pages.push(format!("{base}/runs/{}", submit(&http, &base, pending).await));
    }
    pages.push(format!("{base}/?status=running"));
    for (i, page) in pages.iter().enumerate() {
        let started = Instant::now();
        browser.goto(page).await;
        let waited = started.elapsed();
        assert!(
            waited < STALLED,
            "live page {} of {} took {waited:?} to load: it waited for a connection",
            i + 1,
            pages.len()
        );
    }
    browser.wait_for("the runs list", "return document.getElementById('runs') !== null").await;
    browser.exec("window.__rara_marker = 'same page'; return true").await;
    let late = submit(&http, &base, pending).await;
    browser
        .wait_for(
            "the run submitted last, live",
            &format!("return document.getElementById('runs').innerHTML.includes('{late}')"),
        )
        .await;
    assert_eq!(browser.exec("return window.__rara_marker").await, json!("same page"), "the page was reloaded");
    browser.quit().await;
}
