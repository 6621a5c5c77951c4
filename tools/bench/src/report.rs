//! The report of a throughput run: its types (the JSON keys scripts and BENCHMARKS.md rely
//! on: keep them) and its text form.

use serde::Serialize;

use crate::cost::AwsEstimate;

#[derive(Debug, Serialize)]
pub struct Report {
    pub mode: &'static str,
    /// The steps' operation (`noop`, `sleep 0`).
    pub operation: &'static str,
    pub queue: &'static str,
    pub steps: u64,
    pub batch: u32,
    /// Steps per message the scheduler sent (`RARA_STEPS_PER_MESSAGE`, measured: steps sent ÷
    /// messages sent); an executor batch of `batch` messages names this many times more steps.
    pub steps_per_message: f64,
    pub executors: u32,
    pub elapsed_s: f64,
    pub steps_per_s: f64,
    pub commits: u64,
    pub rollbacks: u64,
    pub commits_per_step: f64,
    /// Every statement on this path runs in its own autocommit transaction, so statements
    /// = transactions (pg_stat_statements is not needed).
    pub statements_per_step: f64,
    /// Counted in the scheduler loop: 2 per reaper run (every `RARA_REAP_INTERVAL_MS`) + one
    /// lease statement per round.
    pub scheduler_statements: u64,
    /// Whether the scheduler woke on `NOTIFY` (else it polled every `--poll-ms`).
    pub listen: bool,
    /// Scheduler waits ended early by a `NOTIFY`.
    pub scheduler_wakeups: u64,
    pub tuples_per_step: Tuples,
    /// Tuples read per step by relation (`pg_stat_user_tables` / `pg_stat_user_indexes`).
    pub reads_per_step: Vec<(String, f64)>,
    /// Share of `steps` updates that were HOT (no new index entries).
    pub steps_hot_update_ratio: f64,
    /// Postgres work per step, the same keys as the peers' (`scripts/pg-figures.py`).
    pub postgres: PostgresWork,
    /// pg_stat_statements, when the server loads it: the statements of the timed part that
    /// took the most execution time.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub top_statements: Vec<TopStatement>,
    /// `--rate`: the submission rate (steps/s); its submissions count in the commits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<u32>,
    pub latency_ms: Latency,
    /// `--rate`: from the start of a step's submission to its message being sent (due to
    /// enqueued; includes the submission statement).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub due_to_enqueued_ms: Option<Latency>,
    pub cpu: Cpu,
    pub peak_rss_mb: f64,
    pub queue_requests_per_step: QueueRequests,
    pub aws_estimate: AwsEstimate,
    pub load_average_1m: [f64; 2],
    /// Soak mode: steps finished in each minute.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps_per_minute: Vec<u64>,
    /// Soak: due-to-claimed of the steps claimed in each minute (read as the soak runs).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub latency_per_minute_ms: Vec<MinuteLatency>,
    /// Soak: the history tables at the end of each minute, and the runs the retention deleted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub history_per_minute: Vec<MinuteHistory>,
    /// Soak: the scheduler's retention (`--prune-after`), seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prune_after_s: Option<u64>,
}

/// Due-to-claimed of the steps whose first attempt started in one minute of a soak (to the
/// tenth of a millisecond, nearest rank).
#[derive(Debug, Clone, Serialize)]
pub struct MinuteLatency {
    /// 1 = the first minute after the loops started.
    pub minute: i32,
    pub claimed: i64,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
}

/// The history tables of a soak, read 2 s after one of its minutes ended.
#[derive(Debug, Clone, Serialize)]
pub struct MinuteHistory {
    /// 1 = the first minute after the loops started.
    pub minute: u32,
    /// Live rows in `steps`, `step_attempts` and `workflow_runs` (`pg_stat_user_tables.n_live_tup`:
    /// inserted − deleted as the statistics count them, re-estimated by each `ANALYZE`).
    pub steps_rows: i64,
    pub attempts_rows: i64,
    pub runs_rows: i64,
    /// Dead row versions in `steps` and `step_attempts` (`n_dead_tup`): what vacuum has yet
    /// to reclaim (updated and deleted rows).
    pub dead_rows: i64,
    /// `pg_total_relation_size` of `steps` and `step_attempts` (indexes, TOAST and dead rows
    /// included: without vacuum, deleted rows keep their space).
    pub history_mb: f64,
    /// Runs the scheduler's retention deleted since the start (its `Counters::pruned`).
    pub runs_pruned: u64,
    /// The machine's 1-minute load average.
    pub load_average_1m: f64,
}

#[derive(Debug, Serialize, Default)]
pub struct Tuples {
    pub inserted: f64,
    pub updated: f64,
    pub deleted: f64,
    pub returned: f64,
    pub fetched: f64,
}

/// What Postgres did per unit of work (here a step; a job for the peers).
#[derive(Debug, Serialize)]
pub struct PostgresWork {
    pub units: u64,
    pub cpu_ms_per_unit: PostgresCpuMs,
    /// `pg_current_wal_lsn()` delta: cluster-wide (other databases' writes count too).
    pub wal_bytes_per_unit: f64,
    pub commits_per_unit: f64,
    /// Inserted + updated + deleted (`pg_stat_database` of the scratch database).
    pub tuples_written_per_unit: f64,
    /// HOT share of the updates of `table`.
    pub hot_update_share: f64,
    pub table: &'static str,
    pub load_average_1m: [f64; 2],
}

/// Postgres CPU per unit, ms; `None` when the server's processes cannot be read.
#[derive(Debug, Serialize)]
pub struct PostgresCpuMs {
    /// The scratch database's backends.
    pub backends: Option<f64>,
    /// walwriter, checkpointer, background writer, autovacuum (live at both readings).
    pub background: Option<f64>,
    /// The postmaster and all its children, reaped ones included: every database.
    pub cluster: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct TopStatement {
    pub query: String,
    pub calls_per_step: f64,
    pub exec_ms_per_step: f64,
}

#[derive(Debug, Serialize, Default)]
pub struct Latency {
    /// Due to claimed (attempt 1 started).
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

#[derive(Debug, Serialize, Default)]
pub struct Cpu {
    pub process_s: f64,
    /// `None` when the backends' /proc entries cannot be read (a remote server).
    pub postgres_backends_s: Option<f64>,
    pub process_per_1000_steps_s: f64,
    pub postgres_per_1000_steps_s: Option<f64>,
}

#[derive(Debug, Serialize, Default)]
pub struct QueueRequests {
    pub send: f64,
    pub receive: f64,
    pub empty_receive: f64,
    pub delete: f64,
    pub change_visibility: f64,
    pub total: f64,
}

/// p50, p95, p99 and max of `values` (nearest rank).
pub fn percentiles(mut values: Vec<f64>) -> Latency {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| {
        if values.is_empty() {
            f64::NAN
        } else {
            values[((q * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1]
        }
    };
    Latency { p50: at(0.5), p95: at(0.95), p99: at(0.99), max: at(1.0) }
}

/// The report as text: the run, then its costs, then its minutes (a soak's).
pub fn print(r: &Report) {
    print_run(r);
    print_costs(r);
    print_minutes(r);
}

/// Throughput, commits, tuples, reads and latency.
fn print_run(r: &Report) {
    println!(
        "rara-bench: {} steps ({} {}, {} queue), batch {} ({:.1} steps per message), {} executors",
        r.steps, r.mode, r.operation, r.queue, r.batch, r.steps_per_message, r.executors
    );
    println!("  throughput          {:.0} steps/s ({:.2} s)", r.steps_per_s, r.elapsed_s);
    println!(
        "  commits per step    {:.3} ({} commits, {} rollbacks; statements per step {:.3}, scheduler statements {})",
        r.commits_per_step, r.commits, r.rollbacks, r.statements_per_step, r.scheduler_statements
    );
    let t = &r.tuples_per_step;
    println!(
        "  tuples per step     inserted {:.2} updated {:.2} deleted {:.2} returned {:.1} fetched {:.1}",
        t.inserted, t.updated, t.deleted, t.returned, t.fetched
    );
    let reads: Vec<String> = r.reads_per_step.iter().map(|(rel, n)| format!("{rel} {n}")).collect();
    println!("  reads per step      {}", reads.join(", "));
    println!("  HOT updates (steps) {:.0} %", r.steps_hot_update_ratio * 100.0);
    let l = &r.latency_ms;
    println!("  due→claimed (ms)    p50 {:.1} p95 {:.1} p99 {:.1} max {:.1}", l.p50, l.p95, l.p99, l.max);
    if let Some(l) = &r.due_to_enqueued_ms {
        println!(
            "  due→enqueued (ms)   p50 {:.1} p95 {:.1} p99 {:.1} max {:.1} (scheduler {}, {} wake-ups)",
            l.p50,
            l.p95,
            l.p99,
            l.max,
            if r.listen { "listening" } else { "polling only" },
            r.scheduler_wakeups
        );
    }
}

/// CPU, Postgres work, the top statements, memory, queue requests and the AWS estimate.
fn print_costs(r: &Report) {
    let opt = |v: Option<f64>| v.map_or("n/a".to_owned(), |v| format!("{v:.3}"));
    println!(
        "  CPU per 1000 steps  rara {:.3} s, Postgres backends {} s",
        r.cpu.process_per_1000_steps_s,
        opt(r.cpu.postgres_per_1000_steps_s)
    );
    let p = &r.postgres;
    println!(
        "  Postgres per step   CPU {} ms backends, {} ms background, {} ms cluster; WAL {:.0} bytes (cluster-wide); tuples written {:.2}",
        opt(p.cpu_ms_per_unit.backends),
        opt(p.cpu_ms_per_unit.background),
        opt(p.cpu_ms_per_unit.cluster),
        p.wal_bytes_per_unit,
        p.tuples_written_per_unit
    );
    for s in &r.top_statements {
        println!("  statement per step  {:.3} ms, {:.3} calls: {}", s.exec_ms_per_step, s.calls_per_step, s.query);
    }
    println!("  peak RSS            {:.1} MiB", r.peak_rss_mb);
    let q = &r.queue_requests_per_step;
    println!(
        "  queue requests/step send {:.3} receive {:.3} (empty {:.3}) delete {:.3} visibility {:.3}",
        q.send, q.receive, q.empty_receive, q.delete, q.change_visibility
    );
    let a = &r.aws_estimate;
    println!(
        "  AWS per 1 M steps   ${:.3} (Lambda compute ${:.3} at {:.1} ms/batch, Lambda requests ${:.3}, SQS ${:.3}); scheduler ${:.2}/month; prices {}",
        a.total_usd_per_million_steps,
        a.lambda_compute_usd,
        a.mean_batch_ms,
        a.lambda_requests_usd,
        a.sqs_requests_usd,
        a.scheduler_usd_per_month,
        a.price_date
    );
}

/// Load, retention and one row per minute.
fn print_minutes(r: &Report) {
    println!("  load average (1 m)  {:.2} before, {:.2} after", r.load_average_1m[0], r.load_average_1m[1]);
    if let (Some(first), Some(last)) = (r.steps_per_minute.first(), r.steps_per_minute.last()) {
        println!("  last / first minute {:.2} (steps/s)", *last as f64 / (*first).max(1) as f64);
    }
    if let Some(seconds) = r.prune_after_s {
        println!("  retention           finished runs deleted {seconds} s after they finished");
    }
    if !r.latency_per_minute_ms.is_empty() {
        println!(
            "  minute  steps/s  claimed  p50 ms  p99 ms  steps rows  attempts rows  runs rows   dead rows  history MiB  runs pruned  load"
        );
    }
    // One row per minute: due→claimed, then the history read 2 s after the minute ended.
    for (i, m) in r.latency_per_minute_ms.iter().enumerate() {
        let ms = |v: Option<f64>| v.map_or("n/a".to_owned(), |v| format!("{v:.1}"));
        let steps_per_s = r.steps_per_minute.get(i).map_or("n/a".to_owned(), |n| format!("{:.0}", *n as f64 / 60.0));
        let history = r.history_per_minute.get(i).map_or("n/a".to_owned(), |h| {
            format!(
                "{:>10}  {:>13}  {:>9}  {:>10}  {:>11.0}  {:>11}  {:.2}",
                h.steps_rows, h.attempts_rows, h.runs_rows, h.dead_rows, h.history_mb, h.runs_pruned, h.load_average_1m
            )
        });
        println!(
            "  {:>6}  {steps_per_s:>7}  {:>7}  {:>6}  {:>6}  {history}",
            m.minute,
            m.claimed,
            ms(m.p50),
            ms(m.p99)
        );
    }
}
