//! The local stack of the end-to-end tests: the scheduler and executor runners (the
//! Lambdas' handler code) run until a run finishes.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use rara_platform::runner::{RunnerOptions, run_executor};
use rara_queue::Queue;
use rara_queue::sqs::SqsQueue;
use rara_runtime::executor::BatchExecutor;
use rara_runtime::metrics::Counters;
use rara_runtime::scheduler::Scheduler;
use rara_runtime::settings::Settings;
use rara_store::Store;
pub use rara_testkit::*;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// The scheduler and executor runners of one local stack.
pub struct Stack {
    pub store: Store,
    pub queue: Arc<SqsQueue>,
    pub settings: Arc<Settings>,
    pub executor: BatchExecutor,
}

impl Stack {
    /// A stack on a fresh test database and fresh queues, with test settings plus `extra`.
    pub async fn fresh(pool: sqlx::PgPool, extra: &[(&str, &str)]) -> (Store, Queues, Stack) {
        let store = Store::new(pool);
        let queues = Queues::new(30, 10).await;
        let stack = Stack::new(store.clone(), &queues, settings(&queues, extra)).await;
        (store, queues, stack)
    }

    pub async fn new(store: Store, queues: &Queues, settings: Settings) -> Stack {
        let settings = Arc::new(settings);
        let queue = queues.queue();
        let registry = rara_runtime::registry::standard_registry(&settings).await.unwrap();
        let executor = BatchExecutor::new(store.clone(), queue.clone(), Arc::new(registry), &settings);
        Stack { store, queue, settings, executor }
    }

    /// A stack on a fresh test database and fresh queues whose registry also holds
    /// `test.echo` (which records each input it gets); the echo with it.
    pub async fn with_echo(pool: sqlx::PgPool) -> (Store, Queues, Stack, Echo) {
        let store = Store::new(pool);
        let queues = Queues::new(30, 10).await;
        let settings = Arc::new(settings(&queues, &[]));
        let echo = Echo::default();
        let mut registry = rara_runtime::registry::standard_registry(&settings).await.unwrap();
        registry.register("test.echo", echo.clone()).unwrap();
        let queue = queues.queue();
        let executor = BatchExecutor::new(store.clone(), queue.clone(), Arc::new(registry), &settings);
        (store.clone(), queues, Stack { store, queue, settings, executor }, echo)
    }

    pub fn scheduler(&self) -> Scheduler {
        Scheduler::new(self.store.clone(), self.queue.clone(), self.settings.clone())
    }

    pub fn runner_options(&self, until_idle: Option<Duration>) -> RunnerOptions {
        RunnerOptions {
            batch_size: 10,
            batching_window: Duration::ZERO,
            wait: Duration::from_secs(1),
            batch_timeout: self.settings.core.function_timeout,
            margin: self.settings.deadline_margin,
            until_idle,
        }
    }

    /// Runs the scheduler and the executor until the run finishes (or `limit` passes).
    /// Returns the run's status and the executor's counters.
    pub async fn run_until_finished(&self, run_id: Uuid, limit: Duration) -> (String, Counters) {
        let stop = CancellationToken::new();
        let scheduler = self.scheduler();
        let sched_stop = stop.clone();
        let sched = tokio::spawn(async move { scheduler.run(None, sched_stop).await });
        let executor = self.executor.clone();
        let queue: Arc<dyn Queue> = self.queue.clone();
        let options = self.runner_options(None);
        let exec_stop = stop.clone();
        let exec = tokio::spawn(async move { run_executor(&executor, queue, &options, exec_stop).await });

        let started = tokio::time::Instant::now();
        let status = loop {
            let status: String = sqlx::query_scalar("SELECT status::text FROM workflow_runs WHERE id = $1")
                .bind(run_id)
                .fetch_one(self.store.pool())
                .await
                .unwrap();
            if status != "running" || started.elapsed() > limit {
                break status;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        stop.cancel();
        sched.await.unwrap().unwrap();
        let counters = exec.await.unwrap().unwrap();
        (status, counters)
    }

    /// Runs only the executor runner until the queue stays empty for `idle`.
    pub async fn drain(&self, idle: Duration) -> Counters {
        let queue: Arc<dyn Queue> = self.queue.clone();
        run_executor(&self.executor, queue, &self.runner_options(Some(idle)), CancellationToken::new()).await.unwrap()
    }
}

/// How many seconds after its run's deadline the step `step_id` finished (database clock).
pub async fn finished_after_deadline(pool: &sqlx::PgPool, step_id: Uuid) -> f64 {
    sqlx::query_scalar(
        "SELECT extract(epoch FROM (s.finished_at - r.deadline_at))::float8 FROM steps s \
         JOIN workflow_runs r ON r.id = s.run_id WHERE s.id = $1",
    )
    .bind(step_id)
    .fetch_one(pool)
    .await
    .unwrap()
}

pub async fn step_status(store: &Store, run_id: Uuid, name: &str) -> String {
    sqlx::query_scalar("SELECT status::text FROM steps WHERE run_id = $1 AND name = $2")
        .bind(run_id)
        .bind(name)
        .fetch_one(store.pool())
        .await
        .unwrap()
}

/// `test.echo`: keeps the input it was called with (secrets resolved) and returns it.
#[derive(Clone, Default)]
pub struct Echo(pub std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>);

#[async_trait::async_trait]
impl rara_domain::executor::Executor for Echo {
    async fn execute(
        &self,
        _ctx: rara_domain::executor::ExecutionContext,
        input: serde_json::Value,
    ) -> Result<serde_json::Value, rara_domain::StepError> {
        self.0.lock().unwrap().push(input.clone());
        Ok(input)
    }
}

/// The tests' secrets: `api` is the value it holds; any other name is not found.
pub struct Vault(pub &'static str);

#[async_trait::async_trait]
impl rara_runtime::secrets::SecretResolver for Vault {
    async fn resolve(&self, name: &str) -> Result<String, rara_runtime::secrets::Error> {
        match name {
            "api" => Ok(self.0.to_owned()),
            _ => Err(rara_runtime::secrets::Error::NotFound { name: name.to_owned() }),
        }
    }
}

/// A log writer into a shared buffer, for tests that read the log lines they caused.
pub struct LogSink(pub Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
