//! [`Stack`]: one scenario's scratch database, queues and runners; starting runners and
//! submitting workflows.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rara_store::Store;
use rara_testkit::history::Ledger;
use rara_testkit::{Queues, SilentPeer, endpoint};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use super::{LEASE_SECONDS, Runner, Shape, seed};
use crate::common::{self, ScratchDb};

/// Scenarios share the machine's Postgres: each holds this lock for reading, and the one
/// that restarts Postgres holds it for writing, so it runs alone.
pub static POSTGRES: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

enum PostgresUse {
    Shared(#[allow(dead_code)] tokio::sync::RwLockReadGuard<'static, ()>),
    Exclusive(#[allow(dead_code)] tokio::sync::RwLockWriteGuard<'static, ()>),
}

/// One scenario's stack: a scratch database, a fresh queue pair, the runners, the ledger of
/// messages the test itself sent or removed, and what it injected.
pub struct Stack {
    _postgres: PostgresUse,
    pub scenario: &'static str,
    pub db: ScratchDb,
    pub pool: PgPool,
    pub store: Store,
    pub queues: Queues,
    pub runners: Vec<Runner>,
    pub ledger: Ledger,
    pub rng: StdRng,
    pub started: Instant,
    pub workflows: u64,
    /// Attempts a fault-free run makes (a `fail` step makes 1 + fail_attempts).
    pub expected_attempts: u64,
    pub faults: u64,
    pub notes: Vec<String>,
    pub scheduler: Option<usize>,
    pub scheduler_restarts: u64,
}

impl Stack {
    pub async fn new(scenario: &'static str) -> Stack {
        Self::with_postgres(scenario, PostgresUse::Shared(POSTGRES.read().await)).await
    }

    /// A stack whose scenario may restart Postgres: no other scenario runs meanwhile.
    pub async fn exclusive(scenario: &'static str) -> Stack {
        Self::with_postgres(scenario, PostgresUse::Exclusive(POSTGRES.write().await)).await
    }

    async fn with_postgres(scenario: &'static str, postgres: PostgresUse) -> Stack {
        let rng = StdRng::seed_from_u64(seed(scenario));
        let queues = Queues::new(30, 10).await;
        let db = ScratchDb::new();
        let migrated = db.rara(&["migrate"]);
        assert!(migrated.status.success(), "{}", common::stderr(&migrated));
        let pool = PgPoolOptions::new().max_connections(4).connect(&db.url).await.unwrap();
        Stack {
            _postgres: postgres,
            scenario,
            store: Store::new(pool.clone()),
            db,
            pool,
            queues,
            runners: Vec::new(),
            ledger: Ledger::default(),
            rng,
            started: Instant::now(),
            workflows: 0,
            expected_attempts: 0,
            faults: 0,
            notes: Vec::new(),
            scheduler: None,
            scheduler_restarts: 0,
        }
    }

    pub fn env(&self, worker: &str) -> Vec<(&'static str, String)> {
        vec![
            ("DATABASE_URL", self.db.url.clone()),
            ("AWS_ENDPOINT_URL", endpoint()),
            ("AWS_ACCESS_KEY_ID", "test".into()),
            ("AWS_SECRET_ACCESS_KEY", "test".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("RARA_QUEUE_URL", self.queues.url.clone()),
            ("RARA_DLQ_URL", self.queues.dlq_url.clone()),
            ("RARA_WORKER_ID", worker.into()),
            ("RARA_LEASE_SECONDS", LEASE_SECONDS.to_string()),
            ("RARA_HEARTBEAT_SECONDS", "1".into()),
            ("RARA_VISIBILITY_TIMEOUT_SECONDS", "30".into()),
            // A lost message's step is leased again after this (the shortest allowed: the
            // visibility timeout); a message merely waiting in the queue still claims.
            ("RARA_DELIVERY_TIMEOUT_SECONDS", "30".into()),
            ("RARA_FUNCTION_TIMEOUT_SECONDS", "20".into()),
            ("RARA_SCHEDULER_POLL_MS", "100".into()),
            ("RARA_REAP_INTERVAL_MS", "500".into()),
            ("RARA_PROGRESS_INTERVAL_MS", "500".into()),
            ("RARA_LOG", "warn".into()),
        ]
    }

    /// Starts a runner; its log goes to `target/tmp/faults-<scenario>-<name>.log`.
    pub fn spawn(&mut self, role: &str, name: &str) -> usize {
        self.spawn_with(role, name, &[])
    }

    /// [`spawn`](Self::spawn) with environment variables of its own on top.
    pub fn spawn_with(&mut self, role: &str, name: &str, extra: &[(&'static str, String)]) -> usize {
        let args: &[&str] = match role {
            "scheduler" => &["--json", "scheduler"],
            // --until-idle only to poll with a 1 s wait (a stop is honoured within a second);
            // the idle limit is never reached.
            _ => &["--json", "executor", "--until-idle", "--idle-seconds", "3600", "--batch-size", "10"],
        };
        let log = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("faults-{}-{name}.log", self.scenario));
        let mut command = Command::new(env!("CARGO_BIN_EXE_rara"));
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("log file"));
        for (k, v) in self.env(name).into_iter().chain(extra.iter().cloned()) {
            command.env(k, v);
        }
        let child = command.spawn().expect("spawn rara");
        self.runners.push(Runner { name: name.to_owned(), child: Some(child) });
        self.runners.len() - 1
    }

    pub fn kill(&mut self, i: usize) {
        self.runners[i].kill();
        self.ledger.killed_executors += 1;
        self.faults += 1;
    }

    pub fn spawn_scheduler(&mut self) {
        let i = self.spawn("scheduler", "scheduler");
        self.scheduler = Some(i);
    }

    /// Restarts the scheduler if it died, as its schedule would invoke the Lambda again.
    pub fn supervise(&mut self) {
        let Some(i) = self.scheduler else { return };
        if self.runners[i].alive() {
            return;
        }
        match self.runners[i].stop() {
            Some(counters) => self.ledger.runners.push(counters),
            None => self.ledger.lost_schedulers += 1,
        }
        self.scheduler_restarts += 1;
        let name = format!("scheduler-{}", self.scheduler_restarts);
        self.scheduler = Some(self.spawn("scheduler", &name));
    }

    /// Submits `n` workflows of `shape` with seeded sleeps.
    pub async fn submit(&mut self, n: usize, shape: Shape) {
        let settings = rara_testkit::settings(&self.queues, &[]);
        for i in 0..n {
            let yaml = match shape {
                Shape::Diamond => {
                    let a = self.rng.random_range(5..=20) as f64 / 10.0;
                    let b = self.rng.random_range(5..=20) as f64 / 10.0;
                    self.expected_attempts += 5;
                    format!(
                        "name: wf-{i}\nsteps:\n\
                         - {{name: a, operation: sleep, input: {{seconds: {a}}}, max_attempts: 5}}\n\
                         - {{name: b, operation: sleep, input: {{seconds: {b}}}, max_attempts: 5, depends_on: [a]}}\n\
                         - {{name: c, operation: fail, input: {{fail_attempts: 1}}, max_attempts: 5, depends_on: [a]}}\n\
                         - {{name: d, operation: noop, max_attempts: 5, depends_on: [b, c]}}\n"
                    )
                }
                Shape::FanOut => {
                    self.expected_attempts += 5;
                    let leaves: String =
                        (0..4).map(|j| format!("- {{name: l{j}, operation: noop, depends_on: [r]}}\n")).collect();
                    format!("name: fan-{i}\nsteps:\n- {{name: r, operation: noop}}\n{leaves}")
                }
                Shape::Sleeper => {
                    self.expected_attempts += 1;
                    format!("name: sleeper-{i}\nsteps:\n- {{name: s, operation: sleep, input: {{seconds: 1.5}}}}\n")
                }
                Shape::Remote => {
                    self.expected_attempts += 1;
                    let seconds = self.rng.random_range(5..=8);
                    format!(
                        "name: long-{i}\nsteps:\n- {{name: train, operation: sleep, version: \"1.0.0\", \
                         input: {{seconds: {seconds}}}, timeout_seconds: 120, max_attempts: 5, \
                         retry: {{initial_delay_seconds: 0.5, max_delay_seconds: 1}}}}\n"
                    )
                }
            };
            rara_testkit::submit(&self.store, &settings, &yaml).await;
            self.workflows += 1;
        }
    }

    /// Submits one workflow given as YAML that a fault-free run finishes in `attempts`.
    pub async fn submit_yaml(&mut self, yaml: &str, attempts: u64) {
        let settings = rara_testkit::settings(&self.queues, &[]);
        rara_testkit::submit(&self.store, &settings, yaml).await;
        self.expected_attempts += attempts;
        self.workflows += 1;
    }

    /// The scratch database's URL with its host and port replaced by `peer`'s.
    pub fn database_url_through(&self, peer: &SilentPeer) -> String {
        let (scheme, rest) = self.db.url.split_once("://").expect("a URL");
        let (credentials, rest) = rest.split_once('@').map_or(("", rest), |(c, r)| (c, r));
        let path = &rest[rest.find('/').expect("a database name")..];
        let at = if credentials.is_empty() { String::new() } else { format!("{credentials}@") };
        format!("{scheme}://{at}{}{path}", peer.addr())
    }
}
