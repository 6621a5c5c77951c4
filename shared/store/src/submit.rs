//! Submitting a workflow: one short transaction stores the run, its steps and their
//! dependencies, visible when its WAL is written and answered once it is flushed. The same
//! idempotency key with the same inputs returns the existing run; with other inputs it is
//! [`Error::IdempotencyConflict`] and nothing is stored. A step referencing a secret no grant
//! permits is [`Error::SecretNotGranted`] and nothing is stored.

use rara_domain::workflow::{MapSpec, Plan, PlannedStep};
use sqlx::Connection;
use uuid::Uuid;

use crate::{DUE_CHANNEL, Error, Store, millis};

/// Where a run comes from beyond its definition: the registered version it was made from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Origin {
    /// The registered version (`rara submit --workflow NAME[@VERSION]`); `None` for a
    /// definition given whole.
    pub workflow_version: Option<i32>,
    /// The schedule and slot the run was made for.
    pub schedule: Option<(Uuid, chrono::DateTime<chrono::Utc>)>,
    /// The run's id when the caller chose it (its inputs were written under the run's prefix in
    /// the artifact store before the run existed); a fresh one otherwise.
    pub run_id: Option<Uuid>,
}

/// The run a submission created or found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Submitted {
    pub run_id: Uuid,
    /// `false` when the idempotency key matched an existing run.
    pub created: bool,
}

impl Store {
    /// Stores a validated plan. Steps without dependencies are due at once; listening
    /// schedulers are notified on [`DUE_CHANNEL`] when it commits, before its flush; it returns
    /// once the run is durable (`SUBMIT_SESSION` says how).
    pub async fn submit(&self, plan: &Plan) -> Result<Submitted, Error> {
        self.submit_traced(plan, None).await
    }

    /// [`Store::submit`], the run's trace context being `trace_context` (a W3C `traceparent`:
    /// the run's root span) instead of a fresh one.
    pub async fn submit_traced(&self, plan: &Plan, trace_context: Option<&str>) -> Result<Submitted, Error> {
        self.submit_from(plan, trace_context, Origin::default()).await
    }

    /// [`Store::submit_traced`] of a run that records its `origin`.
    pub async fn submit_from(
        &self,
        plan: &Plan,
        trace_context: Option<&str>,
        origin: Origin,
    ) -> Result<Submitted, Error> {
        let mut connection = self.pool.acquire().await?;
        let mut tx = connection.begin().await?;
        sqlx::query(SUBMIT_SESSION).execute(&mut *tx).await?;
        let submitted = submit_in(&mut tx, plan, trace_context, origin).await?;
        tx.commit().await?;
        sqlx::query(FLUSH).execute(&mut *connection).await?;
        Ok(submitted)
    }
}

/// The submission's transaction commits once its WAL is written, not flushed (`SET LOCAL`):
/// the run is visible, and its notification delivered, without waiting for the disk, whose
/// flush at the tail of a busy minute takes tens of milliseconds
/// (`docs/benchmarks/journal/2026-12-08-visible-before-the-flush.md`). The caller is answered
/// only after [`FLUSH`], so a run it is told of is durable. Nothing that follows from the
/// run outlives it in a crash before the flush: Postgres recovers a prefix of the WAL, a
/// claim waits for its flush before anything runs outside, and that flush covers the run's
/// WAL before it (`docs/src/internals/quick-steps.md`, "Durability").
const SUBMIT_SESSION: &str = "SELECT set_config('synchronous_commit', 'off', true)";

/// A transaction that writes WAL (a transactional logical message, which any role may emit
/// and nothing reads) and commits with the server's `synchronous_commit`: its commit returns
/// once the WAL up to its own record is flushed, the submission's before it included. An
/// idempotent repeat passes through it too, so the run it is answered with is durable even
/// when the first submission's flush has not yet returned.
const FLUSH: &str = "SELECT pg_logical_emit_message(true, 'rara.submitted', '')";

/// Stores `plan` in the caller's transaction `tx` (see [`Store::submit`]); the run and its
/// notification exist when `tx` commits.
pub(crate) async fn submit_in(
    tx: &mut sqlx::PgConnection,
    plan: &Plan,
    trace_context: Option<&str>,
    origin: Origin,
) -> Result<Submitted, Error> {
    // Secrets are granted, not ambient: an ungranted reference stores nothing.
    if crate::grants::plan_references_secrets(plan) {
        crate::grants::check_plan(&crate::grants::read_grants(&mut *tx).await?, plan)?;
    }
    let Some(run_id) = insert_run(&mut *tx, plan, trace_context, origin).await? else {
        return existing_run(&mut *tx, plan).await;
    };
    let ids: Vec<Uuid> = plan.steps.iter().map(|_| Uuid::now_v7()).collect();
    let steps = &plan.steps;
    let column = |f: fn(&PlannedStep) -> i32| steps.iter().map(f).collect::<Vec<i32>>();
    sqlx::query_file!(
        "sql/submit_steps.sql",
        &ids,
        run_id,
        &(0..steps.len() as i32).collect::<Vec<_>>(),
        &steps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>() as &[&str],
        &steps.iter().map(|s| s.operation.as_str()).collect::<Vec<_>>() as &[&str],
        &steps.iter().map(|s| s.version.as_deref()).collect::<Vec<_>>() as &[Option<&str>],
        &steps.iter().map(|s| &s.input).collect::<Vec<_>>() as &[&serde_json::Value],
        &column(|s| s.depends_on.len() as i32),
        &column(|s| s.retry.max_attempts as i32),
        &column(|s| s.timeout.as_secs().min(i32::MAX as u64) as i32),
        &steps.iter().map(|s| millis(s.retry.initial_delay)).collect::<Vec<_>>(),
        &steps.iter().map(|s| millis(s.retry.max_delay)).collect::<Vec<_>>(),
        &steps.iter().map(|s| s.retry.multiplier).collect::<Vec<_>>(),
        &steps.iter().map(|s| s.map.as_ref().map(|m| &m.items)).collect::<Vec<_>>() as &[Option<&serde_json::Value>],
        &map_column(steps, |m| m.max_concurrency) as &[Option<i32>],
        &map_column(steps, |m| m.tolerated_failures) as &[Option<i32>],
        &steps.iter().map(|s| s.concurrency.as_ref().map(|c| c.key.as_str())).collect::<Vec<_>>() as &[Option<&str>],
        &steps
            .iter()
            .map(|s| s.concurrency.as_ref().and_then(|c| c.limit).map(|n| n.min(i32::MAX as u32) as i32))
            .collect::<Vec<_>>() as &[Option<i32>],
        &column(|s| s.priority),
        &waits_column(steps) as &[Option<serde_json::Value>],
    )
    .execute(&mut *tx)
    .await?;

    let ids = &ids;
    let (from, to): (Vec<Uuid>, Vec<Uuid>) =
        steps.iter().enumerate().flat_map(|(i, s)| s.depends_on.iter().map(move |&d| (ids[i], ids[d]))).unzip();
    if !from.is_empty() {
        sqlx::query_file!("sql/submit_dependencies.sql", &from, &to).execute(&mut *tx).await?;
    }
    // Delivered at commit, and only if it commits.
    sqlx::query_file!("sql/notify_due.sql", DUE_CHANNEL).execute(&mut *tx).await?;
    Ok(Submitted { run_id, created: true })
}

/// The run's row; `None` when its idempotency key is taken.
async fn insert_run(
    tx: &mut sqlx::PgConnection,
    plan: &Plan,
    trace_context: Option<&str>,
    origin: Origin,
) -> Result<Option<Uuid>, Error> {
    let no_output = serde_json::json!({});
    Ok(sqlx::query_file_scalar!(
        "sql/submit_run.sql",
        origin.run_id.unwrap_or_else(Uuid::now_v7),
        &plan.name,
        plan.idempotency_key.as_deref(),
        plan.steps.len() as i32,
        &plan.inputs,
        plan.output.as_ref().unwrap_or(&no_output),
        trace_context,
        origin.workflow_version,
        origin.schedule.map(|s| s.0),
        origin.schedule.map(|s| s.1),
        plan.timeout_seconds.map(|t| t.min(i64::MAX as u64) as i64)
    )
    .fetch_optional(&mut *tx)
    .await?)
}

/// The run the plan's idempotency key names: it, when submitted with the same inputs (offloaded
/// inputs: the same digest), else [`Error::IdempotencyConflict`].
async fn existing_run(tx: &mut sqlx::PgConnection, plan: &Plan) -> Result<Submitted, Error> {
    let existing = sqlx::query_file!("sql/run_by_key.sql", plan.idempotency_key.as_deref(), &plan.inputs)
        .fetch_one(&mut *tx)
        .await?;
    if !existing.same_inputs {
        return Err(Error::IdempotencyConflict {
            key: plan.idempotency_key.clone().unwrap_or_default(),
            run_id: existing.id,
        });
    }
    Ok(Submitted { run_id: existing.id, created: false })
}

/// The column of the waits (`NULL` for a step that runs an operation).
fn waits_column(steps: &[PlannedStep]) -> Vec<Option<serde_json::Value>> {
    steps.iter().map(|s| s.wait.as_ref().map(|w| w.to_json())).collect()
}

/// A column of the map steps' counts (`NULL` for a step that is not a map, or leaves it out).
fn map_column(steps: &[PlannedStep], field: impl Fn(&MapSpec) -> Option<u32>) -> Vec<Option<i32>> {
    steps.iter().map(|s| s.map.as_ref().and_then(&field).map(|n| n.min(i32::MAX as u32) as i32)).collect()
}
