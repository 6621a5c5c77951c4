//! Every statement the store runs, by name, with its parameter types: the [`catalogue`].
//!
//! The statements live in `shared/store/sql/`, one `.sql` file each, with a comment that says
//! what it does and what its parameters are; paste one into `psql` (`PREPARE`/`EXECUTE`) to
//! run it. Most are complete as they stand, and the modules run them with
//! `sqlx::query_file!`, so the build checks them against the schema (offline, from the
//! committed `.sqlx/`). A few are composed here, and are catalogued in their composed form:
//!
//! - the fenced writes, whose files mark where the holder goes (`{holder}`, `{holders}`)
//!   and get the one predicate of [`fence`];
//! - the statements that record successes, with the shared `succeed_release.sql` (unless
//!   none of the steps has dependents) and `succeed_tail.sql` where they write `{succeed_tail}`;
//! - the statements that finish steps other than by success: their targets, then the shared
//!   `finish_tail.sql` (`WITH RECURSIVE targets AS (<targets>), <tail>`);
//! - `ANALYZE` of each hot table (the `statistics` module).
//!
//! `tests/catalogue.rs` prepares every statement of the catalogue against the migrated
//! schema and checks its parameter types. `cargo run -q -p rara-store --example sql -- NAME`
//! prints one as it runs (composed), `--example sql` alone lists them.

use std::sync::LazyLock;

use crate::fence;

macro_rules! sql_file {
    ($name:literal) => {
        include_str!(concat!("../sql/", $name, ".sql"))
    };
}

/// One statement: its name (the `.sql` file's), its text, and the types of `$1`, `$2`, …
/// as Postgres names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Statement {
    pub name: &'static str,
    pub sql: &'static str,
    pub params: &'static [&'static str],
}

// The scheduler (lease.rs).
pub const LEASE_DUE: &str = sql_file!("lease_due");
pub const RELEASE: &str = sql_file!("release");
pub const REAP_RELEASE: &str = sql_file!("reap_release");
pub const PRUNE_FLOW_KEYS: &str = sql_file!("prune_flow_keys");
pub static REAP_FAIL: LazyLock<String> = LazyLock::new(|| finish(sql_file!("reap_fail_targets"), 3));

// The executor (claim.rs, running.rs, outcome.rs, references.rs).
pub const CLAIM: &str = sql_file!("claim");
pub const CLAIM_VERDICTS: &str = sql_file!("claim_verdicts");
pub const ATTEMPT_STARTED: &str = sql_file!("attempt_started");
pub static HEARTBEAT: LazyLock<String> = LazyLock::new(|| fence::one(sql_file!("heartbeat")));
pub static PROGRESS: LazyLock<String> = LazyLock::new(|| fence::one(sql_file!("progress")));
pub static ARTIFACT: LazyLock<String> = LazyLock::new(|| fence::one(sql_file!("artifact")));
pub static ATTEMPT_VERSION: LazyLock<String> = LazyLock::new(|| fence::one(sql_file!("attempt_version")));
pub static SUCCEED: LazyLock<String> =
    LazyLock::new(|| succeed(&fence::batch(sql_file!("succeed")), Dependents::Release(5)));
// Quick steps (quick.rs).
pub const QUICK_LOCK: &str = sql_file!("quick_lock");
pub static QUICK_SUCCEED: LazyLock<String> =
    LazyLock::new(|| succeed(sql_file!("quick_succeed"), Dependents::Release(7)));
/// [`QUICK_SUCCEED`] for a batch none of whose steps has dependents: six parameters.
pub static QUICK_SUCCEED_LEAVES: LazyLock<String> =
    LazyLock::new(|| succeed(sql_file!("quick_succeed"), Dependents::None));
pub static RETRY: LazyLock<String> = LazyLock::new(|| fence::batch(sql_file!("retry")));
pub static FAIL: LazyLock<String> = LazyLock::new(|| finish(&fence::batch(sql_file!("fail_targets")), 5));
pub static RELEASE_RUNNING: LazyLock<String> = LazyLock::new(|| fence::batch(sql_file!("release_running")));
pub static PARK: LazyLock<String> = LazyLock::new(|| fence::batch(sql_file!("park")));
pub const DETACHED_ATTEMPTS: &str = sql_file!("detached_attempts");

// Data flow at claim (references.rs).
pub const REFERENCES: &str = sql_file!("references");
pub const GATHERED_BYTES: &str = sql_file!("gathered_bytes");
pub static ATTEMPT_INPUT: LazyLock<String> = LazyLock::new(|| fence::batch(sql_file!("attempt_input")));

// Fan-out (map.rs).
pub static EXPAND: LazyLock<String> = LazyLock::new(|| fence::batch(sql_file!("expand")));

// Operators (outcome.rs, submit.rs, read.rs, dlq.rs).
pub static CANCEL_STEP: LazyLock<String> = LazyLock::new(|| finish(sql_file!("cancel_step_targets"), 3));
pub static CANCEL_RUN: LazyLock<String> = LazyLock::new(|| finish(sql_file!("cancel_run_targets"), 3));
pub const RETRY_STEP: &str = sql_file!("retry_step");
pub const NOTIFY_DUE: &str = sql_file!("notify_due");
pub const SUBMIT_RUN: &str = sql_file!("submit_run");
pub const RUN_BY_KEY: &str = sql_file!("run_by_key");
pub const SUBMIT_STEPS: &str = sql_file!("submit_steps");
pub const SUBMIT_DEPENDENCIES: &str = sql_file!("submit_dependencies");
pub const READ_RUN: &str = sql_file!("read_run");
pub const READ_STEPS: &str = sql_file!("read_steps");
pub const READ_DEPENDENCIES: &str = sql_file!("read_dependencies");
pub const READ_ATTEMPTS: &str = sql_file!("read_attempts");
pub const READ_ARTIFACTS: &str = sql_file!("read_artifacts");
pub const ARTIFACT_BY_ID: &str = sql_file!("artifact_by_id");
pub const RUN_EXISTS: &str = sql_file!("run_exists");
pub const STEP_EXISTS: &str = sql_file!("step_exists");
pub const LIST_RUNS: &str = sql_file!("list_runs");
pub const CONSOLE_REGISTER: &str = sql_file!("console_register");
pub const CONSOLE_UNREGISTER: &str = sql_file!("console_unregister");
pub const CONSOLE_NOTIFICATIONS: &str = sql_file!("console_notifications");
pub const RUN_OF_STEP: &str = sql_file!("run_of_step");
pub const LOST_REASON: &str = sql_file!("lost_reason");
pub const DLQ_STEP: &str = sql_file!("dlq_step");
pub const RUN_TRACE: &str = sql_file!("run_trace");

// What the API and the console read (browse.rs).
pub const BROWSE_RUNS: &str = sql_file!("browse_runs");
pub const RUNNING_RUNS: &str = sql_file!("running_runs");
pub const RETRYABLE_STEPS: &str = sql_file!("retryable_steps");
pub const STEP_INPUTS: &str = sql_file!("step_inputs");
pub const RUN_STATUS: &str = sql_file!("run_status");

// Set-based operator actions, one statement per batch (bulk.rs).
pub const RETRY_STEPS: &str = sql_file!("retry_steps");
pub static CANCEL_RUNS: LazyLock<String> = LazyLock::new(|| finish(sql_file!("cancel_runs_targets"), 3));
pub const DETACHED_ATTEMPTS_OF_RUNS: &str = sql_file!("detached_attempts_of_runs");

// Flow control's operator side (flow.rs).
pub const FLOW_LIMIT_SET: &str = sql_file!("flow_limit_set");
pub const FLOW_LIMIT_UNSET: &str = sql_file!("flow_limit_unset");
pub const FLOW_LIMITS_LIST: &str = sql_file!("flow_limits_list");
// Secret grants (grants.rs).
pub const GRANT_SECRET: &str = sql_file!("grant_secret");
pub const REVOKE_SECRET: &str = sql_file!("revoke_secret");
pub const SECRET_GRANTS: &str = sql_file!("secret_grants");
pub const RUN_NAME: &str = sql_file!("run_name");
pub const FLOW_PAUSE: &str = sql_file!("flow_pause");
pub const FLOW_RESUME: &str = sql_file!("flow_resume");
pub const FLOW_PAUSES: &str = sql_file!("flow_pauses");
pub const FLOW_OVERRUNS: &str = sql_file!("flow_overruns");

// Durable waits (waits.rs).
pub static WAIT_SUCCEED: LazyLock<String> =
    LazyLock::new(|| succeed(sql_file!("wait_succeed"), Dependents::Release(3)));
pub static WAIT_FAIL: LazyLock<String> = LazyLock::new(|| finish(sql_file!("wait_fail_targets"), 3));
// Child workflows (children.rs); the other statements of waits, definitions and schedules are
// only in the catalogue below.
pub static CHILD_WAIT: LazyLock<String> = LazyLock::new(|| fence::one(sql_file!("child_wait")));

#[rustfmt::skip]
const SCHEDULE_CREATE_PARAMS: &[&str] = &["uuid", "text", "text", "int4", "text", "int8", "text", "jsonb", "text",
    "int8", "int8", "timestamptz", "timestamptz"];
#[rustfmt::skip]
const SCHEDULE_ADVANCE_PARAMS: &[&str] = &["uuid", "timestamptz", "timestamptz", "timestamptz", "uuid", "timestamptz",
    "int8", "int8", "int8", "int8", "text"];
// Retention (retention.rs).
pub const PRUNE_RUNS: &str = sql_file!("prune_runs");
pub const PRUNE_ARCHIVE_RUNS: &str = sql_file!("prune_archive_runs");
pub const ARTIFACT_DELETIONS_PENDING: &str = sql_file!("artifact_deletions_pending");
pub const ARTIFACT_DELETIONS_DONE: &str = sql_file!("artifact_deletions_done");
pub const ARTIFACT_DELETIONS_FAILED: &str = sql_file!("artifact_deletions_failed");
pub const PRUNABLE_RUNS: &str = sql_file!("prunable_runs");
// Test and benchmark history (testing.rs, feature `testing`).
pub const HISTORY_RUNS: &str = sql_file!("history_runs");
pub const HISTORY_STEPS: &str = sql_file!("history_steps");
pub const HISTORY_ATTEMPTS: &str = sql_file!("history_attempts");

// Who is a member of rara's roles (roles.rs).
pub const ROLE_MEMBERS: &str = sql_file!("role_members");

// Planner statistics (statistics.rs).
pub const GROWN_TABLES: &str = sql_file!("grown_tables");
/// The hot tables whose statistics decide the plans of the claim and outcome statements
/// (`statistics.rs` keeps them fresh, as `statistics::TABLES`).
pub const HOT_TABLES: [&str; 3] = ["steps", "step_attempts", "workflow_runs"];
/// `ANALYZE (SKIP_LOCKED) <table>` for each of [`HOT_TABLES`], in that order, through
/// `rara_analyze` (migration `…000021_roles.sql`): a SECURITY DEFINER function of the schema's
/// owner, since only a table's owner may analyze it and the scheduler does not own the schema.
pub static ANALYZE: LazyLock<Vec<String>> =
    LazyLock::new(|| HOT_TABLES.iter().map(|t| format!("SELECT rara_analyze('{t}')")).collect());

/// `WITH RECURSIVE targets AS (<targets>), <finish_tail.sql>`, the error of the dependents it
/// skips bound as `$skip_error`.
fn finish(targets: &str, skip_error: u8) -> String {
    let tail = sql_file!("finish_tail").replace("{dependency_failed}", &format!("${skip_error}::jsonb"));
    format!("WITH RECURSIVE targets AS (\n{targets}),\n{tail}")
}

/// What a statement that records successes does for the steps' dependents.
enum Dependents {
    /// Releases them (`succeed_release.sql`), waking the schedulers on the channel bound as
    /// `$n` when one became due.
    Release(u8),
    /// None of the batch's steps has any (DESIGN.md "Quick steps", steps without dependents):
    /// nothing to release, nobody to wake (`woke` is empty), and no statement part that would
    /// look for them.
    None,
}

/// A statement that records successes, where it writes `{succeed_tail}`:
/// `succeed_release.sql` (or an empty `woke`, [`Dependents::None`]) then `succeed_tail.sql`.
fn succeed(statement: &str, dependents: Dependents) -> String {
    let release = match dependents {
        Dependents::Release(channel) => {
            sql_file!("succeed_release").replace("{due_channel}", &format!("${channel}::text"))
        }
        Dependents::None => "woke AS (SELECT WHERE false),\n".to_owned(),
    };
    statement.replace("{succeed_tail}", &format!("{release}{}", sql_file!("succeed_tail").trim_end()))
}

/// A run search's parameters (`browse::RunFilter`): status, name, created after and before, then
/// (after the replay's limit) the version, the error code and the inputs' document.
const FILTERED_LIMIT: &[&str] =
    &["rara_run_status", "text", "timestamptz", "timestamptz", "int8", "int4", "text", "jsonb"];
const FILTERED: &[&str] = &["rara_run_status", "text", "timestamptz", "timestamptz", "int4", "text", "jsonb"];
const HOLDER: [&str; 3] = ["uuid", "text", "int8"];
const HOLDERS: [&str; 3] = ["uuid[]", "text[]", "int8[]"];

/// Every statement of the store, composed statements in their composed form.
pub fn catalogue() -> Vec<Statement> {
    let overview = crate::overview::STATEMENTS.iter().map(|&(name, sql, params)| s(name, sql, params)).collect();
    [hot_path(), operators(), waits(), maintenance(), overview].concat()
}

fn s(name: &'static str, sql: &'static str, params: &'static [&'static str]) -> Statement {
    Statement { name, sql, params }
}

/// The scheduler's and the executor's statements.
fn hot_path() -> Vec<Statement> {
    vec![
        s("lease_due", LEASE_DUE, &["int8", "text", "int8", "timestamptz", "int8", "text"]),
        s("release", RELEASE, &["uuid[]", "uuid[]"]),
        s("reap_release", REAP_RELEASE, &["int8", "jsonb"]),
        s("reap_fail", REAP_FAIL.as_str(), &["int8", "jsonb", "jsonb"]),
        s("claim", CLAIM, &["uuid[]", "uuid[]", "text", "int8", "jsonb"]),
        s("claim_verdicts", CLAIM_VERDICTS, &["uuid[]", "uuid[]", "int8"]),
        s("attempt_started", ATTEMPT_STARTED, &["uuid[]", "int4[]"]),
        s("heartbeat", HEARTBEAT.as_str(), &[HOLDER[0], HOLDER[1], HOLDER[2], "int8"]),
        s("progress", PROGRESS.as_str(), &[HOLDER[0], HOLDER[1], HOLDER[2], "float8", "text"]),
        s("artifact", ARTIFACT.as_str(), &[HOLDER[0], HOLDER[1], HOLDER[2], "text", "text", "text", "int8", "text"]),
        s("attempt_version", ATTEMPT_VERSION.as_str(), &[HOLDER[0], HOLDER[1], HOLDER[2], "text"]),
        s("succeed", SUCCEED.as_str(), &[HOLDERS[0], HOLDERS[1], HOLDERS[2], "jsonb[]", "text"]),
        s("quick_lock", QUICK_LOCK, &["uuid[]", "uuid[]", "text[]"]),
        s(
            "quick_succeed",
            QUICK_SUCCEED.as_str(),
            &["uuid[]", "uuid[]", "int8[]", "jsonb[]", "text", "timestamptz", "text"],
        ),
        s(
            "quick_succeed_leaves",
            QUICK_SUCCEED_LEAVES.as_str(),
            &["uuid[]", "uuid[]", "int8[]", "jsonb[]", "text", "timestamptz"],
        ),
        s("retry", RETRY.as_str(), &[HOLDERS[0], HOLDERS[1], HOLDERS[2], "jsonb[]", "int8[]", "int8"]),
        s("fail", FAIL.as_str(), &[HOLDERS[0], HOLDERS[1], HOLDERS[2], "jsonb[]", "jsonb"]),
        s("release_running", RELEASE_RUNNING.as_str(), &[HOLDERS[0], HOLDERS[1], HOLDERS[2], "jsonb", "text"]),
        s(
            "park",
            PARK.as_str(),
            &[HOLDERS[0], HOLDERS[1], HOLDERS[2], "text[]", "int8[]", "timestamptz[]", "int8", "int8"],
        ),
        s("detached_attempts", DETACHED_ATTEMPTS, &["uuid"]),
        s("references", REFERENCES, &["uuid[]", "text[]", "uuid[]", "text[]", "text[]", "uuid[]"]),
        s("gathered_bytes", GATHERED_BYTES, &["uuid[]"]),
        s("attempt_input", ATTEMPT_INPUT.as_str(), &[HOLDERS[0], HOLDERS[1], HOLDERS[2], "jsonb[]"]),
        s(
            "expand",
            EXPAND.as_str(),
            &[HOLDERS[0], HOLDERS[1], HOLDERS[2], "int4[]", "uuid[]", "uuid[]", "int4[]", "text[]", "jsonb[]", "text"],
        ),
    ]
}

/// What operators, the API and the console run: submission, reads, cancels and retries,
/// flow control.
fn operators() -> Vec<Statement> {
    vec![
        s("cancel_step", CANCEL_STEP.as_str(), &["uuid", "jsonb", "jsonb"]),
        s("cancel_run", CANCEL_RUN.as_str(), &["uuid", "jsonb", "jsonb"]),
        s("retry_step", RETRY_STEP, &["uuid"]),
        s("notify_due", NOTIFY_DUE, &["text"]),
        s(
            "submit_run",
            SUBMIT_RUN,
            &["uuid", "text", "text", "int4", "jsonb", "jsonb", "text", "int4", "uuid", "timestamptz", "int8"],
        ),
        s("run_by_key", RUN_BY_KEY, &["text", "jsonb"]),
        s(
            "submit_steps",
            SUBMIT_STEPS,
            &[
                "uuid[]", "uuid", "int4[]", "text[]", "text[]", "text[]", "jsonb[]", "int4[]", "int4[]", "int4[]",
                "int8[]", "int8[]", "float8[]", "jsonb[]", "int4[]", "int4[]", "text[]", "int4[]", "int4[]", "jsonb[]",
            ],
        ),
        s("submit_dependencies", SUBMIT_DEPENDENCIES, &["uuid[]", "uuid[]"]),
        s("rerun_steps_of", sql_file!("rerun_steps_of"), &["uuid"]),
        s("rerun_run", sql_file!("rerun_run"), &["uuid", "uuid", "int4", "int4", "jsonb", "text"]),
        s("rerun_steps", sql_file!("rerun_steps"), &["uuid", "uuid[]", "uuid[]", "bool[]", "int4[]"]),
        s("rerun_carry", sql_file!("rerun_carry"), &["uuid", "uuid", "text[]"]),
        s("overdue_runs", sql_file!("overdue_runs"), &["int8"]),
        s("replay_candidates", sql_file!("replay_candidates"), FILTERED_LIMIT),
        s("read_run", READ_RUN, &["uuid"]),
        s("run_trace", RUN_TRACE, &["uuid"]),
        s("read_steps", READ_STEPS, &["uuid"]),
        s("read_dependencies", READ_DEPENDENCIES, &["uuid"]),
        s("read_attempts", READ_ATTEMPTS, &["uuid"]),
        s("read_artifacts", READ_ARTIFACTS, &["uuid"]),
        s("artifact_by_id", ARTIFACT_BY_ID, &["int8"]),
        s("run_exists", RUN_EXISTS, &["uuid"]),
        s("step_exists", STEP_EXISTS, &["uuid"]),
        s("list_runs", LIST_RUNS, &["rara_run_status", "int8"]),
        s("console_register", CONSOLE_REGISTER, &["uuid", "int8"]),
        s("console_unregister", CONSOLE_UNREGISTER, &["uuid"]),
        s("console_notifications", CONSOLE_NOTIFICATIONS, &["bool"]),
        s("run_of_step", RUN_OF_STEP, &["uuid"]),
        s("lost_reason", LOST_REASON, &["uuid"]),
        s("dlq_step", DLQ_STEP, &["uuid[]"]),
        s(
            "browse_runs",
            BROWSE_RUNS,
            &[
                "rara_run_status",
                "text",
                "timestamptz",
                "timestamptz",
                "timestamptz",
                "uuid",
                "int8",
                "int4",
                "text",
                "jsonb",
            ],
        ),
        s("running_runs", RUNNING_RUNS, FILTERED),
        s("retryable_steps", RETRYABLE_STEPS, FILTERED),
        s("step_inputs", STEP_INPUTS, &["uuid"]),
        s("run_status", RUN_STATUS, &["uuid"]),
        s("run_inputs", sql_file!("run_inputs"), &["uuid"]),
        s("retry_steps", RETRY_STEPS, &["uuid[]"]),
        s("cancel_runs", CANCEL_RUNS.as_str(), &["uuid[]", "jsonb", "jsonb"]),
        s("detached_attempts_of_runs", DETACHED_ATTEMPTS_OF_RUNS, &["uuid[]"]),
        s("flow_limit_set", FLOW_LIMIT_SET, &["text", "int4", "int4", "int8", "int4", "text"]),
        s("flow_limit_unset", FLOW_LIMIT_UNSET, &["text", "text"]),
        s("flow_limits_list", FLOW_LIMITS_LIST, &[]),
        s("flow_pause", FLOW_PAUSE, &["text", "text"]),
        s("flow_resume", FLOW_RESUME, &["text", "text", "text"]),
        s("flow_pauses", FLOW_PAUSES, &[]),
        s("flow_overruns", FLOW_OVERRUNS, &[]),
        s("grant_secret", GRANT_SECRET, &["text", "text", "text", "text[]"]),
        s("revoke_secret", REVOKE_SECRET, &["text", "text", "text"]),
        s("secret_grants", SECRET_GRANTS, &[]),
        s("run_name", RUN_NAME, &["uuid"]),
    ]
}

/// Durable waits: the scheduler's round, signals, events, completion tokens, what waits.
fn waits() -> Vec<Statement> {
    vec![
        s("wait_start", sql_file!("wait_start"), &["int8"]),
        s("wait_match", sql_file!("wait_match"), &[]),
        s("wait_due", sql_file!("wait_due"), &["int8"]),
        s("wait_succeed", WAIT_SUCCEED.as_str(), &["int8", "uuid[]", "text"]),
        s("wait_fail", WAIT_FAIL.as_str(), &["int8", "uuid[]", "jsonb"]),
        s("wait_forget", sql_file!("wait_forget"), &["int8"]),
        s("signal_steps", sql_file!("signal_steps"), &["uuid", "text"]),
        s("signal", sql_file!("signal"), &["uuid", "text", "text", "jsonb", "text", "bool"]),
        s("event", sql_file!("event"), &["text", "text", "text", "jsonb"]),
        s("wait_token", sql_file!("wait_token"), &["text"]),
        s("wait_token_decide", sql_file!("wait_token_decide"), &["text", "jsonb"]),
        s("waits_of_run", sql_file!("waits_of_run"), &["uuid", "int8"]),
        s("prune_events", sql_file!("prune_events"), &["int8", "int8"]),
        s("register_definition", sql_file!("register_definition"), &["text", "jsonb"]),
        s("definition", sql_file!("definition"), &["text", "int4"]),
        s("definitions_list", sql_file!("definitions_list"), &["int8"]),
        s("definition_versions", sql_file!("definition_versions"), &["text", "int8"]),
        s("schedule_create", sql_file!("schedule_create"), SCHEDULE_CREATE_PARAMS),
        s("schedules_list", sql_file!("schedules_list"), &["int8", "text"]),
        s("schedule_pause", sql_file!("schedule_pause"), &["text", "bool"]),
        s("schedule_delete", sql_file!("schedule_delete"), &["text"]),
        s("schedule_due", sql_file!("schedule_due"), &["int8"]),
        s("schedule_advance", sql_file!("schedule_advance"), SCHEDULE_ADVANCE_PARAMS),
        s("schedule_fired", sql_file!("schedule_fired"), &["uuid", "int8", "uuid", "timestamptz", "bool"]),
        s("child_wait", CHILD_WAIT.as_str(), &[HOLDER[0], HOLDER[1], HOLDER[2], "uuid", "text"]),
        s("child_depth", sql_file!("child_depth"), &["uuid", "int4"]),
        s("children_ended", sql_file!("children_ended"), &["int8"]),
        s("child_decide", sql_file!("child_decide"), &["uuid", "int4", "jsonb"]),
        s("children_running", sql_file!("children_running"), &["uuid[]"]),
    ]
}

/// Retention, planner statistics, and the history writers of tests and benchmarks.
fn maintenance() -> Vec<Statement> {
    let mut all = vec![
        s("prune_runs", PRUNE_RUNS, &["int8", "int8", "bool"]),
        s("prune_archive_runs", PRUNE_ARCHIVE_RUNS, &["int8", "int8", "bool"]),
        s("artifact_deletions_pending", ARTIFACT_DELETIONS_PENDING, &["int8"]),
        s("artifact_deletions_done", ARTIFACT_DELETIONS_DONE, &["uuid[]"]),
        s("artifact_deletions_failed", ARTIFACT_DELETIONS_FAILED, &["uuid[]", "text"]),
        s("prunable_runs", PRUNABLE_RUNS, &["int8"]),
        s("grown_tables", GROWN_TABLES, &["int8", "text[]"]),
        s("history_runs", HISTORY_RUNS, &["int8", "int8", "int8"]),
        s("history_steps", HISTORY_STEPS, &["int8", "int8", "int8"]),
        s("history_attempts", HISTORY_ATTEMPTS, &["int8", "int8"]),
        s("prune_flow_keys", PRUNE_FLOW_KEYS, &["int8"]),
        s("role_members", ROLE_MEMBERS, &["text[]"]),
    ];
    all.extend(ANALYZE.iter().map(|sql| s("analyze", sql.as_str(), &[])));
    all
}
