//! `rara ui` as an operator starts it: it refuses a non-loopback bind without
//! `--insecure-bind`, refuses a `Host` it does not answer to (a real TCP request, as
//! `curl -H 'Host: evil.example'` sends it), and off loopback serves reads only to the token or
//! a session from its one-time login URL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{ScratchDb, stderr};
use serde_json::Value;

const TOKEN: &str = "ui-test-token";

struct Ui(Child);

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `rara ui --json` with `args`; the process and the line it printed (url, login_url,
/// token), which it prints once it listens.
fn start(db: &ScratchDb, args: &[&str]) -> (Ui, Value) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rara"))
        .args(["--json", "ui", "--token", TOKEN])
        .args(args)
        .env("DATABASE_URL", &db.url)
        .env("RARA_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let printed = serde_json::from_str(&line).unwrap_or_else(|_| panic!("not the JSON line: {line}"));
    (Ui(child), printed)
}

/// A GET written by hand to `port` on 127.0.0.1 with `headers`: the status and the answer.
fn get(port: u16, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut socket = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut request = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    socket.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    socket.read_to_string(&mut answer).unwrap();
    (answer.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0), answer)
}

fn port_of(printed: &Value) -> u16 {
    printed["url"].as_str().unwrap().rsplit(':').next().unwrap().parse().unwrap()
}

#[test]
fn a_non_loopback_bind_without_insecure_bind_refuses_to_start_and_says_why() {
    let out = Command::new(env!("CARGO_BIN_EXE_rara"))
        .args(["ui", "--bind", "0.0.0.0:0"])
        .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a usage error: {}", stderr(&out));
    let message = stderr(&out);
    assert!(message.contains("--insecure-bind") && message.contains("plain HTTP"), "{message}");
}

#[test]
fn a_request_naming_another_host_is_refused_by_a_running_rara_ui() {
    let db = ScratchDb::new();
    assert!(db.rara(&["migrate"]).status.success());
    let (_ui, printed) = start(&db, &["--bind", "127.0.0.1:0"]);
    let port = port_of(&printed);

    let (status, answer) = get(port, "/api/runs", &[("Host", "evil.example")]);
    assert_eq!(status, 421, "{answer}");
    assert!(answer.contains("misdirected") && answer.contains("evil.example"), "{answer}");
    let (status, _) = get(port, "/api/runs", &[("Host", &format!("127.0.0.1:{port}"))]);
    assert_eq!(status, 200, "its own address");
    let (status, _) = get(port, "/api/runs", &[("Host", &format!("localhost:{port}"))]);
    assert_eq!(status, 200, "a loopback name");
}

#[test]
fn off_loopback_a_read_needs_the_token_or_the_session_of_the_login_url() {
    let db = ScratchDb::new();
    assert!(db.rara(&["migrate"]).status.success());
    let (_ui, printed) = start(&db, &["--bind", "0.0.0.0:0", "--insecure-bind", "--allow-host", "rara.internal"]);
    let port = port_of(&printed);
    let host = format!("127.0.0.1:{port}");
    let login = printed["login_url"].as_str().unwrap();
    assert!(!login.contains(TOKEN), "the token never goes in a URL: {login}");

    let (status, answer) = get(port, "/api/runs", &[("Host", &host)]);
    assert_eq!(status, 401, "{answer}");
    let (status, _) = get(port, "/", &[("Host", "rara.internal")]);
    assert_eq!(status, 401, "an allowed name, still no session");
    let bearer = format!("Bearer {TOKEN}");
    assert_eq!(get(port, "/api/runs", &[("Host", &host), ("Authorization", &bearer)]).0, 200);

    let path = &login[login.find("/login").unwrap()..];
    let (status, answer) = get(port, path, &[("Host", &host)]);
    assert_eq!(status, 303, "{answer}");
    let set_cookie = answer.lines().find(|l| l.to_ascii_lowercase().starts_with("set-cookie:")).unwrap();
    let cookie = set_cookie.split_once(':').unwrap().1.trim().split(';').next().unwrap().to_owned();
    assert!(!cookie.contains(TOKEN), "the session is not the token: {cookie}");
    assert_eq!(get(port, "/api/runs", &[("Host", &host), ("Cookie", &cookie)]).0, 200, "the session reads");
    assert_eq!(get(port, path, &[("Host", &host)]).0, 401, "the printed URL works once");
}
