//! Durable waits (docs/src/guide/waits.md): a step that waits for a timer, a signal or an event
//! costs a row in `waits` while it waits, and nothing else.
//!
//! Completing a wait is decided once: the first conditional write of `waits.completion` (the
//! step still `waiting` at the wait's attempt, locked; nothing decided yet) wins, whoever
//! makes it: a signal ([`Store::signal`]), an event ([`Store::send_event`]), a completion token
//! ([`Store::complete_by_token`]), the timer or the timeout ([`Store::wait_round`]). The
//! decision is applied to the step in the same transaction, unless the run is paused: then the
//! scheduler applies it once the run is resumed.

use rara_domain::state::StepStatus;
use rara_domain::wait::{self, Wait};
use serde_json::Value;
use uuid::Uuid;

use crate::outcome::dependency_failed;
use crate::{DUE_CHANNEL, Error, Store, sql};

/// What one maintenance round of waits did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WaitRound {
    /// Steps that began to wait.
    pub started: u64,
    /// Waits decided: by their timer or timeout, or by a signal or event that was there first.
    pub decided: u64,
    /// Of those, the signal and event waits whose timeout came.
    pub timed_out: u64,
    /// Decided completions applied to their steps (succeeded or failed).
    pub applied: u64,
    /// The waits that ended and were forgotten (whoever decided them): their spans.
    pub ended: Vec<EndedWait>,
}

/// A wait that ended, as its span in the run's trace shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndedWait {
    pub step_id: Uuid,
    pub run_id: Uuid,
    pub attempt: i32,
    /// `timer`, `signal` or `event`.
    pub kind: String,
    /// The signal's or the event's name.
    pub name: Option<String>,
    pub started_at: chrono::DateTime<chrono::Utc>,
    pub decided_at: chrono::DateTime<chrono::Utc>,
    /// What decided it: `signal`, `event`, `token`, `timer`, `timeout`, `cancelled`, …
    pub decided_by: String,
    /// Whether the step failed (rejected, timed out with `on_timeout: fail`, cancelled).
    pub failed: bool,
    /// The run's `traceparent`.
    pub trace_context: Option<String>,
    /// A child workflow's wait: its child run.
    pub child_run_id: Option<Uuid>,
}

/// A signal as sent (`rara signal`, `POST /api/runs/{id}/signals/{name}`).
#[derive(Debug, Clone, PartialEq)]
pub struct Signal {
    /// Its idempotency id: the same id twice is one delivery.
    pub id: String,
    pub payload: Value,
    /// `Some(reason)`: the waiting step fails with `SIGNAL_REJECTED`.
    pub reject: Option<String>,
}

/// What became of a signal.
#[derive(Debug, Clone, PartialEq)]
pub enum Delivery {
    /// It completed these steps (by name); `paused`: their run is paused, and the completion is
    /// applied once it is resumed.
    Delivered { steps: Vec<String>, paused: bool },
    /// No step waits for it yet; it is kept for the step that accepts it early.
    Kept { steps: Vec<String> },
    /// A signal with this id was received already: nothing changed.
    Duplicate,
    /// Refused: no step waits for it now (why, for a person).
    NotWaiting(String),
    /// Refused: the payload fails the schema of a step that waits for it (path, why).
    Invalid(Vec<(String, String)>),
}

/// What became of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventReceipt {
    /// `false`: an event of this name and id was received already, nothing changed.
    pub fresh: bool,
    /// Waits it completed.
    pub completed: usize,
}

/// What a completion token did.
#[derive(Debug, Clone, PartialEq)]
pub enum TokenCompletion {
    /// It completed the step (its run, its name); `paused`: applied once its run is resumed.
    Completed { run_id: Uuid, step: String, paused: bool },
    /// Refused: the payload fails the wait's schema (path, why).
    Invalid(Vec<(String, String)>),
}

/// A wait under way, as the status, the API and the console show it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct WaitView {
    pub step_id: Uuid,
    pub run_id: Uuid,
    pub run_name: String,
    pub step: String,
    /// `timer`, `signal` or `event`.
    pub kind: String,
    /// The signal's or the event's name.
    pub name: Option<String>,
    /// The event's key.
    pub key: Option<String>,
    /// When the timer completes or the wait times out.
    pub due_at: Option<chrono::DateTime<chrono::Utc>>,
    pub started_at: chrono::DateTime<chrono::Utc>,
    /// The completion token: the credential of `POST /api/waits/{token}`. Served only to
    /// authenticated callers.
    pub token: Option<String>,
    /// What decided it while its run is paused.
    pub decided_by: Option<String>,
    /// The JSON Schema a payload must satisfy (a signal's).
    pub schema: Option<Value>,
}

impl Store {
    /// One round of the scheduler's waits, each part at most `batch` rows: start the due
    /// waits, decide those a signal or event came for while they started, those whose
    /// timer or timeout came and those whose child run ended (`children.rs`), apply what was decided (runs not paused), forget what was applied.
    pub async fn wait_round(&self, batch: u32) -> Result<WaitRound, Error> {
        let batch = i64::from(batch);
        let started = sqlx::query_file_scalar!("sql/wait_start.sql", batch).fetch_all(&self.pool).await?.len();
        let matched = sqlx::query_file_scalar!("sql/wait_match.sql").fetch_all(&self.pool).await?.len();
        let due = sqlx::query_file!("sql/wait_due.sql", batch).fetch_all(&self.pool).await?;
        let timed_out = due.iter().filter(|d| d.timed_out).count();
        let children = self.decide_children(batch).await?;
        let applied = apply(&mut *self.pool.acquire().await?, None, batch).await?;
        let ended = sqlx::query_file!("sql/wait_forget.sql", batch)
            .fetch_all(&self.pool)
            .await?
            .into_iter()
            .map(|r| EndedWait {
                step_id: r.step_id,
                run_id: r.run_id,
                attempt: r.attempt,
                kind: r.kind,
                name: r.name,
                started_at: r.started_at,
                decided_at: r.completed_at,
                decided_by: r.decided_by,
                failed: r.failed,
                trace_context: r.trace_context,
                child_run_id: r.child_run_id,
            })
            .collect();
        Ok(WaitRound {
            started: started as u64,
            decided: (matched + due.len() + children) as u64,
            timed_out: timed_out as u64,
            applied: applied as u64,
            ended,
        })
    }

    /// Delivers `signal` named `name` to the run `run_id` (see [`Delivery`]). A payload is
    /// checked against the schema of every step that waits for the signal; a rejection is not.
    pub async fn signal(&self, run_id: Uuid, name: &str, signal: &Signal) -> Result<Delivery, Error> {
        let mut tx = self.pool.begin().await?;
        let steps = signal_steps(&mut tx, run_id, name).await?;
        if signal.reject.is_none() {
            let problems: Vec<(String, String)> = steps
                .iter()
                .filter_map(|s| schema_of(&s.wait))
                .flat_map(|schema| wait::payload_problems(&schema, &signal.payload))
                .collect();
            if !problems.is_empty() {
                return Ok(Delivery::Invalid(problems));
            }
        }
        let early: Vec<String> = steps
            .iter()
            .filter(|s| s.status == StepStatus::Pending && accepts_early(&s.wait))
            .map(|s| s.name.clone())
            .collect();
        let row = sqlx::query_file!(
            "sql/signal.sql",
            run_id,
            name,
            &signal.id,
            &signal.payload,
            signal.reject.as_deref(),
            !early.is_empty()
        )
        .fetch_one(&mut *tx)
        .await?;
        if !row.fresh {
            return Ok(Delivery::Duplicate);
        }
        if row.decided.is_empty() {
            if row.recorded {
                tx.commit().await?;
                return Ok(Delivery::Kept { steps: early });
            }
            // Read again: what decided a wait while this transaction waited for it is committed.
            return Ok(Delivery::NotWaiting(not_waiting(name, &signal_steps(&mut tx, run_id, name).await?)));
        }
        let applied = apply(&mut tx, Some(&row.decided), row.decided.len() as i64).await?;
        tx.commit().await?;
        let names = steps.iter().filter(|s| row.decided.contains(&s.id)).map(|s| s.name.clone()).collect();
        Ok(Delivery::Delivered { steps: names, paused: applied < row.decided.len() })
    }

    /// Receives the event `name` with `id` and `key`: it completes every step waiting for that
    /// name and key, and is kept for the waits that begin later (until the retention).
    pub async fn send_event(&self, name: &str, key: &str, id: &str, payload: &Value) -> Result<EventReceipt, Error> {
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query_file!("sql/event.sql", name, id, key, payload).fetch_one(&mut *tx).await?;
        apply(&mut tx, Some(&row.decided), row.decided.len() as i64).await?;
        tx.commit().await?;
        Ok(EventReceipt { fresh: row.fresh, completed: row.decided.len() })
    }

    /// Completes the wait whose completion token is `token` with `payload` as its step's
    /// output. `None`: no wait has this token, or it was used (or its wait ended).
    pub async fn complete_by_token(&self, token: &str, payload: &Value) -> Result<Option<TokenCompletion>, Error> {
        let mut tx = self.pool.begin().await?;
        let Some(found) = sqlx::query_file!("sql/wait_token.sql", token).fetch_optional(&mut *tx).await? else {
            return Ok(None);
        };
        if let Some(schema) = schema_of(&found.wait) {
            let problems = wait::payload_problems(&schema, payload);
            if !problems.is_empty() {
                return Ok(Some(TokenCompletion::Invalid(problems)));
            }
        }
        let decided: Vec<Uuid> =
            sqlx::query_file_scalar!("sql/wait_token_decide.sql", token, payload).fetch_all(&mut *tx).await?;
        if decided.is_empty() {
            return Ok(None);
        }
        let applied = apply(&mut tx, Some(&decided), 1).await?;
        tx.commit().await?;
        Ok(Some(TokenCompletion::Completed { run_id: found.run_id, step: found.name, paused: applied == 0 }))
    }

    /// The waits under way of `run_id` (`None`: of every run, the oldest first), at most `limit`.
    pub async fn waits(&self, run_id: Option<Uuid>, limit: u32) -> Result<Vec<WaitView>, Error> {
        views(&mut *self.pool.acquire().await?, run_id, limit).await
    }

    /// Deletes up to `limit` events received more than `retention_seconds` ago.
    pub async fn prune_events(&self, retention_seconds: u64, limit: u32) -> Result<u64, Error> {
        let rows = sqlx::query_file_scalar!(
            "sql/prune_events.sql",
            retention_seconds.min(i64::MAX as u64) as i64,
            i64::from(limit)
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(rows as u64)
    }
}

/// The waits under way of `run_id` (`None`: of every run), at most `limit`, on `conn`.
pub(crate) async fn views(
    conn: &mut sqlx::PgConnection,
    run_id: Option<Uuid>,
    limit: u32,
) -> Result<Vec<WaitView>, Error> {
    let rows = sqlx::query_file!("sql/waits_of_run.sql", run_id, i64::from(limit)).fetch_all(conn).await?;
    Ok(rows
        .into_iter()
        .map(|r| WaitView {
            step_id: r.step_id,
            run_id: r.run_id,
            run_name: r.run_name,
            step: r.name,
            kind: r.kind,
            name: r.wait_name,
            key: r.key,
            due_at: r.due_at,
            started_at: r.started_at,
            token: Some(r.token),
            decided_by: r.decided_by,
            schema: schema_of(&r.wait),
        })
        .collect())
}

impl WaitView {
    /// What it waits for, as `rara status` shows it: `signal approve, 1 h 12 min left`,
    /// `timer, 10 s left`, `event dataset.uploaded (key A), no timeout`, or what decided it
    /// while its run is paused.
    pub fn describe(&self, now: chrono::DateTime<chrono::Utc>) -> String {
        let what = match (self.kind.as_str(), &self.name, &self.key) {
            ("event", Some(name), Some(key)) => format!("event {name} (key {key})"),
            ("child", Some(name), Some(run)) if self.decided_by.is_none() => {
                return format!("workflow {name}, run {run}");
            }
            (kind, Some(name), _) => format!("{kind} {name}"),
            (kind, _, _) => kind.to_owned(),
        };
        if let Some(by) = &self.decided_by {
            return format!("{what}, completed by {by}; applied when the run is resumed");
        }
        match self.due_at {
            Some(due) => {
                let left = (due - now).to_std().unwrap_or_default();
                let left = std::time::Duration::from_secs(left.as_secs());
                format!("{what}, {} left", rara_domain::human::duration(left))
            }
            None => format!("{what}, no timeout"),
        }
    }
}

/// Applies the decided completions of `only` (`None`: any), at most `limit` of each kind, to
/// steps still waiting in runs not paused; returns how many steps it finished.
async fn apply(conn: &mut sqlx::PgConnection, only: Option<&[Uuid]>, limit: i64) -> Result<usize, Error> {
    if only.is_some_and(<[Uuid]>::is_empty) {
        return Ok(0);
    }
    let succeeded: Vec<Uuid> = sqlx::query_scalar(sql::WAIT_SUCCEED.as_str())
        .bind(limit)
        .bind(only)
        .bind(DUE_CHANNEL)
        .fetch_all(&mut *conn)
        .await?;
    let failed: Vec<Uuid> = sqlx::query_scalar(sql::WAIT_FAIL.as_str())
        .bind(limit)
        .bind(only)
        .bind(dependency_failed())
        .fetch_all(&mut *conn)
        .await?;
    Ok(succeeded.len() + failed.len())
}

/// A step that waits for a signal, as `signal_steps.sql` reads it.
struct SignalStep {
    id: Uuid,
    name: String,
    status: StepStatus,
    wait: Value,
    decided_by: Option<String>,
}

async fn signal_steps(conn: &mut sqlx::PgConnection, run_id: Uuid, name: &str) -> Result<Vec<SignalStep>, Error> {
    Ok(sqlx::query_file!("sql/signal_steps.sql", run_id, name)
        .fetch_all(conn)
        .await?
        .into_iter()
        .map(|r| SignalStep { id: r.id, name: r.name, status: r.status, wait: r.wait, decided_by: r.decided_by })
        .collect())
}

fn planned(wait: &Value) -> Option<Wait> {
    serde_json::from_value(wait.clone()).ok()
}

fn schema_of(wait: &Value) -> Option<Value> {
    match planned(wait)? {
        Wait::Signal { schema, .. } => schema,
        _ => None,
    }
}

fn accepts_early(wait: &Value) -> bool {
    matches!(planned(wait), Some(Wait::Signal { accept_early: true, .. }))
}

/// Why no step took the signal, for a person: none waits for it, or each one's status.
fn not_waiting(name: &str, steps: &[SignalStep]) -> String {
    if steps.is_empty() {
        return format!("no step of this run waits for the signal {name:?}");
    }
    let each: Vec<String> = steps
        .iter()
        .map(|s| match &s.decided_by {
            Some(by) => format!("{} was already completed by {by}", s.name),
            None => format!("{} is {}", s.name, s.status),
        })
        .collect();
    format!("no step waits for the signal {name:?} now: {}", each.join("; "))
}
