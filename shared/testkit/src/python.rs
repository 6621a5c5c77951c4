//! The real Python executor (`executors/python`, package `rara_worker`) as a subprocess, from
//! the venv `scripts/python-env.sh` creates: on a free port or a given one, killed (SIGKILL)
//! and its scratch directory (log, artifacts) removed on drop.
//!
//! Started with [`PythonServer::start`] it takes calls without a token (`--no-auth`);
//! [`PythonServer::start_guarded`] starts one that asks for a token (and TLS) as a
//! deployment does.
//!
//! A [`Standby`] has paid Python's start (interpreter and imports) but binds its port only
//! when told, so a test can bring a server up on a fixed port within milliseconds (the port a
//! killed server held, say). A test that needs a server down at start puts a
//! [`crate::LatePeer`] in front of a running one instead: it owns its port from the start.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use uuid::Uuid;

use crate::repo_root;

/// How long Python may take to print `listening on HOST:PORT`.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Imports what `python -m rara_worker` imports, then waits for a line on stdin before
/// running the same `main` with the command-line arguments.
const STANDBY_BOOT: &str =
    "import sys\nfrom rara_worker.__main__ import main\nsys.stdin.readline()\nmain(sys.argv[1:])\n";

/// The venv's python, created (or checked) once per test binary by `scripts/python-env.sh`.
pub fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let out = Command::new("bash")
            .arg("scripts/python-env.sh")
            .current_dir(repo_root())
            .output()
            .expect("scripts/python-env.sh runs");
        assert!(out.status.success(), "python-env.sh failed: {}", String::from_utf8_lossy(&out.stderr));
        let stdout = String::from_utf8(out.stdout).unwrap();
        PathBuf::from(stdout.lines().last().expect("python-env.sh prints the python path").trim())
    })
}

/// A port on 127.0.0.1 that nothing listens on (free when this returns, and from then on
/// anyone's: another process may take it before the caller binds it). A test that needs a
/// port nothing answers on yet holds one with a [`crate::LatePeer`] instead.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Who a [`PythonServer::start_guarded`] server lets in.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    /// Accepted bearer tokens (two during a rotation); at least one.
    pub tokens: Vec<String>,
    /// TLS (PEM files); `None`: plaintext.
    pub tls: Option<Tls>,
    /// More environment variables (`RARA_WORKER_CONFORMANCE=1`, say).
    pub env: Vec<(String, String)>,
}

/// The PEM files of a server's TLS.
#[derive(Debug, Clone)]
pub struct Tls {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Clients must present a certificate this CA signed (mTLS).
    pub client_ca: Option<PathBuf>,
}

/// A running Python executor.
#[derive(Debug)]
pub struct PythonServer {
    process: Process,
    url: String,
    port: u16,
}

/// A Python executor started but not listening yet; [`Standby::listen`] binds its port.
#[derive(Debug)]
pub struct Standby {
    process: Process,
    stdin: ChildStdin,
}

/// The child and its scratch directory; killed and removed on drop.
#[derive(Debug)]
struct Process {
    child: Child,
    scratch: PathBuf,
    /// The first line of stdout (`listening on HOST:PORT`), once printed.
    first_line: Receiver<String>,
}

impl PythonServer {
    /// A server on a free port of 127.0.0.1.
    pub fn start() -> PythonServer {
        Self::start_on(0)
    }

    /// A server on `port` of 127.0.0.1 (0: a free one).
    pub fn start_on(port: u16) -> PythonServer {
        Self::start_with_env(port, &[])
    }

    /// A server on `port` (0: a free one) with the environment variables `env` added (an
    /// `OTEL_EXPORTER_OTLP_*` endpoint, say). It takes calls without a token (`--no-auth`):
    /// [`PythonServer::start_guarded`] starts one that does not.
    pub fn start_with_env(port: u16, env: &[(&str, &str)]) -> PythonServer {
        let mut command = Command::new(python());
        command.args(["-m", "rara_worker", "--no-auth"]).stdin(Stdio::null()).envs(env.iter().copied());
        Process::spawn(command, port).listening()
    }

    /// A server on a free port that accepts only calls carrying one of `guard.tokens` (given
    /// in `RARA_EXECUTOR_TOKENS`, as a deployment does) and serves TLS when `guard.tls` says
    /// so; its [`url`](Self::url) is then `https://127.0.0.1:PORT`.
    pub fn start_guarded(guard: &Guard) -> PythonServer {
        let mut command = Command::new(python());
        command.args(["-m", "rara_worker"]).stdin(Stdio::null()).env("RARA_EXECUTOR_TOKENS", guard.tokens.join(","));
        command.envs(guard.env.iter().map(|(k, v)| (k, v)));
        if let Some(tls) = &guard.tls {
            command.arg("--tls-cert").arg(&tls.cert).arg("--tls-key").arg(&tls.key);
            if let Some(ca) = &tls.client_ca {
                command.arg("--tls-client-ca").arg(ca);
            }
        }
        let mut server = Process::spawn(command, 0).listening();
        if guard.tls.is_some() {
            server.url = server.url.replacen("http://", "https://", 1);
        }
        server
    }

    /// A server that binds `port` of 127.0.0.1 when [`Standby::listen`] is called.
    pub fn standby(port: u16) -> Standby {
        let mut command = Command::new(python());
        command.args(["-c", STANDBY_BOOT, "--no-auth"]).stdin(Stdio::piped());
        let mut process = Process::spawn(command, port);
        let stdin = process.child.stdin.take().unwrap();
        Standby { process, stdin }
    }

    /// `http://127.0.0.1:PORT` (`https://` when guarded with TLS).
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:PORT`, for a peer in front of the server.
    pub fn addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Where the server writes artifact files.
    pub fn artifacts_dir(&self) -> PathBuf {
        self.process.scratch.join("artifacts")
    }

    /// What the server logged so far (its stderr).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.process.scratch.join("server.log")).unwrap_or_default()
    }

    /// Waits up to `within` for a log line containing `needle`; returns whether it came.
    pub fn wait_for_log(&self, needle: &str, within: Duration) -> bool {
        let deadline = std::time::Instant::now() + within;
        loop {
            if self.log().contains(needle) {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL: the process dies at once, mid-stream, without a goodbye.
    pub fn kill(&mut self) {
        self.process.kill();
    }
}

impl Standby {
    /// Binds the port and waits for `listening on`, on a blocking thread: the test's runtime
    /// (and the stack it drives) goes on meanwhile.
    pub async fn listen(mut self) -> PythonServer {
        tokio::task::spawn_blocking(move || {
            self.stdin.write_all(b"listen\n").and_then(|()| self.stdin.flush()).expect("tell the standby to listen");
            self.process.listening()
        })
        .await
        .expect("the standby listens")
    }
}

impl Process {
    fn spawn(mut command: Command, port: u16) -> Process {
        let scratch = std::env::temp_dir().join(format!("rara-python-{}", Uuid::new_v4()));
        std::fs::create_dir_all(&scratch).unwrap();
        let log = std::fs::File::create(scratch.join("server.log")).unwrap();
        let mut child = command
            .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--artifacts-dir"])
            .arg(scratch.join("artifacts"))
            .current_dir(repo_root())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("the Python executor starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, first_line) = channel();
        // Reads the first line, then drains stdout so the server never writes to a closed pipe.
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next().and_then(Result::ok).unwrap_or_default());
            lines.for_each(drop);
        });
        Process { child, scratch, first_line }
    }

    fn listening(self) -> PythonServer {
        let line = self.first_line.recv_timeout(START_TIMEOUT).unwrap_or_default();
        let Some(address) = line.trim().strip_prefix("listening on ") else {
            let log = std::fs::read_to_string(self.scratch.join("server.log")).unwrap_or_default();
            panic!("the Python executor did not start (first line {line:?}); its log:\n{log}");
        };
        let port = address.rsplit_once(':').and_then(|(_, p)| p.parse().ok()).expect("listening on HOST:PORT");
        PythonServer { url: format!("http://{address}"), port, process: self }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}
