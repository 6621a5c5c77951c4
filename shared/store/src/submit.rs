//! Submitting a workflow: one short transaction stores the run, its steps and their
//! dependencies. The same idempotency key returns the existing run.

use rara_domain::workflow::Plan;
use uuid::Uuid;

use crate::{Error, Store, millis};

/// The run a submission created or found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Submitted {
    pub run_id: Uuid,
    /// `false` when the idempotency key matched an existing run.
    pub created: bool,
}

impl Store {
    /// Stores a validated plan. Steps without dependencies are due at once; listening
    /// schedulers are notified on [`DUE_CHANNEL`](crate::DUE_CHANNEL) when it commits.
    pub async fn submit(&self, plan: &Plan) -> Result<Submitted, Error> {
        let mut tx = self.pool.begin().await?;
        let run_id = Uuid::now_v7();
        let total = plan.steps.len() as i32;
        let inserted: Option<Uuid> = sqlx::query_scalar(
            "INSERT INTO workflow_runs (id, name, idempotency_key, steps_total, steps_unfinished)
             VALUES ($1, $2, $3, $4, $4)
             ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
             RETURNING id",
        )
        .bind(run_id)
        .bind(&plan.name)
        .bind(&plan.idempotency_key)
        .bind(total)
        .fetch_optional(&mut *tx)
        .await?;
        if inserted.is_none() {
            let existing: Uuid = sqlx::query_scalar("SELECT id FROM workflow_runs WHERE idempotency_key = $1")
                .bind(&plan.idempotency_key)
                .fetch_one(&mut *tx)
                .await?;
            tx.commit().await?;
            return Ok(Submitted { run_id: existing, created: false });
        }

        let ids: Vec<Uuid> = plan.steps.iter().map(|_| Uuid::now_v7()).collect();
        let steps = &plan.steps;
        sqlx::query(
            "INSERT INTO steps (id, run_id, position, name, operation, version, input, pending_deps,
                                max_attempts, timeout_seconds, retry_initial_delay_ms, retry_max_delay_ms,
                                retry_multiplier)
             SELECT t.id, $2, t.position, t.name, t.operation, t.version, t.input, t.pending_deps,
                    t.max_attempts, t.timeout_seconds, t.initial_ms, t.max_ms, t.multiplier
             FROM unnest($1::uuid[], $3::int[], $4::text[], $5::text[], $6::text[], $7::jsonb[], $8::int[],
                         $9::int[], $10::int[], $11::bigint[], $12::bigint[], $13::float8[])
                  AS t(id, position, name, operation, version, input, pending_deps,
                       max_attempts, timeout_seconds, initial_ms, max_ms, multiplier)",
        )
        .bind(&ids)
        .bind(run_id)
        .bind((0..steps.len() as i32).collect::<Vec<_>>())
        .bind(steps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>())
        .bind(steps.iter().map(|s| s.operation.as_str()).collect::<Vec<_>>())
        .bind(steps.iter().map(|s| s.version.as_deref()).collect::<Vec<_>>())
        .bind(steps.iter().map(|s| &s.input).collect::<Vec<_>>())
        .bind(steps.iter().map(|s| s.depends_on.len() as i32).collect::<Vec<_>>())
        .bind(steps.iter().map(|s| s.retry.max_attempts as i32).collect::<Vec<_>>())
        .bind(steps.iter().map(|s| s.timeout.as_secs().min(i32::MAX as u64) as i32).collect::<Vec<_>>())
        .bind(steps.iter().map(|s| millis(s.retry.initial_delay)).collect::<Vec<_>>())
        .bind(steps.iter().map(|s| millis(s.retry.max_delay)).collect::<Vec<_>>())
        .bind(steps.iter().map(|s| s.retry.multiplier).collect::<Vec<_>>())
        .execute(&mut *tx)
        .await?;

        let ids = &ids;
        let (from, to): (Vec<Uuid>, Vec<Uuid>) =
            steps.iter().enumerate().flat_map(|(i, s)| s.depends_on.iter().map(move |&d| (ids[i], ids[d]))).unzip();
        if !from.is_empty() {
            sqlx::query(
                "INSERT INTO step_dependencies (step_id, depends_on) SELECT * FROM unnest($1::uuid[], $2::uuid[])",
            )
            .bind(&from)
            .bind(&to)
            .execute(&mut *tx)
            .await?;
        }
        // Delivered at commit, and only if it commits.
        sqlx::query("SELECT pg_notify($1, '')").bind(crate::DUE_CHANNEL).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(Submitted { run_id, created: true })
    }
}
