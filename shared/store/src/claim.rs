//! The executor's claim: one statement for a whole batch of (step, lease token) pairs when
//! every pair claims, as they normally do; the pairs that did not are judged by a second.
//!
//! A pair claims its step when the token matches and either the step is `leased`, due and
//! its lease unexpired, or the step is `running` under an expired lease (its holder died:
//! take over). Each claim issues a new fence from `rara_fence_seq`, counts an attempt and
//! opens its row in `step_attempts`; a step whose attempt runs detached on a remote executor
//! is *re-attached* instead (same attempt, same fence: [`ClaimedStep::resume`]). A pair that
//! does not claim is told apart:
//! stale (acknowledge, run nothing), still held (come back when the hold ends) or unknown.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use rara_domain::StepError;
use rara_domain::executor::Resume;
use rara_domain::step_error::codes;
use uuid::Uuid;

use crate::{Error, Holder, Store, millis};

/// One message's request to run a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClaimRequest {
    pub step_id: Uuid,
    pub lease_token: Uuid,
}

/// Everything an executor needs to run a claimed step.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedStep {
    pub holder: Holder,
    pub run_id: Uuid,
    pub name: String,
    pub operation: String,
    pub version: Option<String>,
    pub input: serde_json::Value,
    /// 1-based number of this attempt.
    pub attempt: u32,
    pub max_attempts: u32,
    pub timeout: Duration,
    pub retry_initial_delay: Duration,
    pub retry_max_delay: Duration,
    pub retry_multiplier: f64,
    pub lease_expires_at: DateTime<Utc>,
    /// Whether this claim took the step over from a holder whose lease had expired, closing
    /// that holder's attempt (a re-attach continues its attempt: not a takeover).
    pub took_over: bool,
    /// When this claim attached the holder (the database's clock).
    pub attached_at: DateTime<Utc>,
    /// Set when this claim re-attaches to an attempt running detached on a remote executor:
    /// where it runs and the last event recorded.
    pub resume: Option<Resume>,
    /// When the attempt started: now for a new attempt, earlier for a re-attached one. The
    /// step's timeout counts from it.
    pub started_at: DateTime<Utc>,
    /// Set for a map step (`for_each`): what this claim must do instead of running it.
    pub map: Option<MapPhase>,
    /// Set for a map child: the index of its element in its map's list.
    pub map_index: Option<u32>,
}

/// A map step's two claims (DESIGN.md "Data flow"): neither runs its operation.
#[derive(Debug, Clone, PartialEq)]
pub enum MapPhase {
    /// The first: resolve the list `for_each` finds and create one child per element
    /// ([`Store::expand`](crate::Store::expand)).
    Expand { for_each: serde_json::Value, max_concurrency: Option<u32> },
    /// Once every child succeeded (or failed within `tolerated_failures`): the step's output
    /// is the list of their outputs, in order, `null` for a child that failed when
    /// `failures_tolerated`.
    Gather { size: u32, failures_tolerated: bool },
}

/// Why a message was not allowed to run its step: it must be acknowledged and nothing runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StaleReason {
    /// The step's lease token is no longer the message's (re-leased, reaped or released).
    TokenMismatch,
    /// The step already finished.
    Finished,
    /// The same message appears twice in the batch; the first copy claims.
    DuplicateInBatch,
    /// The holder's lease expired on the last attempt: the reaper owns the step now. (A
    /// never-claimed lease stays claimable by its message until the step is leased again.)
    LeaseExpired,
}

/// The fate of one claim request.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimOutcome {
    Claimed(Box<ClaimedStep>),
    Stale(StaleReason),
    /// Another holder has the step (or its retry is not due yet): let the message come back
    /// after this long, when that hold ends.
    Held {
        retry_after: Duration,
    },
    /// No such step.
    UnknownStep,
}

/// A row of `sql/claim.sql`: a claimed pair.
struct Row {
    id: Uuid,
    run_id: Uuid,
    name: String,
    operation: String,
    version: Option<String>,
    input: serde_json::Value,
    attempt: i32,
    max_attempts: i32,
    fence: i64,
    timeout_seconds: i32,
    retry_initial_delay_ms: i64,
    retry_max_delay_ms: i64,
    retry_multiplier: f64,
    lease_expires_at: DateTime<Utc>,
    lease_token: Uuid,
    took_over: bool,
    remote_endpoint: Option<String>,
    remote_sequence: Option<i64>,
    attached_at: DateTime<Utc>,
    for_each: Option<serde_json::Value>,
    map_max_concurrency: Option<i32>,
    map_size: Option<i32>,
    map_index: Option<i32>,
    map_tolerated_failures: Option<i32>,
}

fn duration_ms(ms: i64) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}

impl Row {
    /// The claimed step; `started_at`: when a re-attached attempt started (its claim's
    /// attach time otherwise).
    fn into_claimed(self, worker: &str, started_at: Option<DateTime<Utc>>) -> ClaimedStep {
        let resume = self
            .remote_endpoint
            .zip(self.remote_sequence)
            .map(|(endpoint, sequence)| Resume { endpoint, sequence: u64::try_from(sequence).unwrap_or(0) });
        ClaimedStep {
            holder: Holder { step_id: self.id, worker: worker.to_owned(), fence: self.fence },
            run_id: self.run_id,
            name: self.name,
            operation: self.operation,
            version: self.version,
            input: self.input,
            attempt: self.attempt.max(1) as u32,
            max_attempts: self.max_attempts.max(1) as u32,
            timeout: Duration::from_secs(self.timeout_seconds.max(1) as u64),
            retry_initial_delay: duration_ms(self.retry_initial_delay_ms),
            retry_max_delay: duration_ms(self.retry_max_delay_ms),
            retry_multiplier: self.retry_multiplier,
            lease_expires_at: self.lease_expires_at,
            took_over: self.took_over,
            attached_at: self.attached_at,
            started_at: started_at.filter(|_| resume.is_some()).unwrap_or(self.attached_at),
            resume,
            map: self.for_each.map(|for_each| match self.map_size {
                Some(size) => MapPhase::Gather {
                    size: size.max(0) as u32,
                    failures_tolerated: self.map_tolerated_failures.is_some_and(|n| n > 0),
                },
                None => {
                    MapPhase::Expand { for_each, max_concurrency: self.map_max_concurrency.map(|n| n.max(1) as u32) }
                }
            }),
            map_index: self.map_index.map(|i| i.max(0) as u32),
        }
    }
}

/// The verdict on a pair that did not claim (`sql/claim_verdicts.sql`).
fn verdict(verdict: &str, held_ms: i64) -> ClaimOutcome {
    match verdict {
        "unknown" => ClaimOutcome::UnknownStep,
        "finished" => ClaimOutcome::Stale(StaleReason::Finished),
        "token_mismatch" => ClaimOutcome::Stale(StaleReason::TokenMismatch),
        "lease_expired" => ClaimOutcome::Stale(StaleReason::LeaseExpired),
        _ => ClaimOutcome::Held { retry_after: duration_ms(held_ms) },
    }
}

impl Store {
    /// Claims a batch for `worker` (one statement when every request claims). Returns one
    /// outcome per request, in order.
    /// `lease` is how long the claim holds the step before a heartbeat must extend it.
    pub async fn claim(
        &self,
        worker: &str,
        requests: &[ClaimRequest],
        lease: Duration,
    ) -> Result<Vec<ClaimOutcome>, Error> {
        // A message delivered twice in one batch: only its first copy may claim.
        let mut seen = HashSet::new();
        let unique: Vec<ClaimRequest> = requests.iter().copied().filter(|r| seen.insert(*r)).collect();
        let mut judged = self.claim_unique(worker, &unique, lease).await?.into_iter();
        let mut first = HashSet::new();
        Ok(requests
            .iter()
            .map(|r| {
                if first.insert(*r) {
                    judged.next().unwrap_or(ClaimOutcome::UnknownStep)
                } else {
                    ClaimOutcome::Stale(StaleReason::DuplicateInBatch)
                }
            })
            .collect())
    }

    /// The claim of distinct pairs, one outcome each, in order: one statement when every
    /// pair claims (the normal case); the pairs that did not are judged by a second one, and
    /// the attempts re-attached to have their start read by a third. Only the claim's
    /// failure is an error.
    async fn claim_unique(
        &self,
        worker: &str,
        unique: &[ClaimRequest],
        lease: Duration,
    ) -> Result<Vec<ClaimOutcome>, Error> {
        if unique.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<Uuid> = unique.iter().map(|r| r.step_id).collect();
        let tokens: Vec<Uuid> = unique.iter().map(|r| r.lease_token).collect();
        let taken_over =
            StepError::retryable(codes::LEASE_EXPIRED, "the holder's lease expired; another executor took over");
        let rows =
            sqlx::query_file_as!(Row, "sql/claim.sql", &ids, &tokens, worker, millis(lease), taken_over.to_json())
                .fetch_all(&self.pool)
                .await?;
        // The claim has committed: a read after it that fails must not lose what it claimed
        // nor judge a pair. What it leaves undecided is held for one claim lease: its message
        // comes back, and the next claim of it takes over (or judges it).
        let held = || ClaimOutcome::Held { retry_after: lease };
        let reattached: (Vec<Uuid>, Vec<i32>) =
            rows.iter().filter(|r| r.remote_endpoint.is_some()).map(|r| (r.id, r.attempt)).unzip();
        let started: Option<HashMap<Uuid, DateTime<Utc>>> = if reattached.0.is_empty() {
            Some(HashMap::new())
        } else {
            match sqlx::query_file!("sql/attempt_started.sql", &reattached.0, &reattached.1).fetch_all(&self.pool).await
            {
                Ok(attempts) => Some(attempts.into_iter().map(|a| (a.step_id, a.started_at)).collect()),
                Err(e) => {
                    tracing::warn!(error = %e, "could not read the re-attached attempts' start; they come back after the claim lease");
                    None
                }
            }
        };
        let mut claimed: HashMap<ClaimRequest, Row> =
            rows.into_iter().map(|r| (ClaimRequest { step_id: r.id, lease_token: r.lease_token }, r)).collect();
        let rest: Vec<&ClaimRequest> = unique.iter().filter(|r| !claimed.contains_key(r)).collect();
        let mut verdicts = if rest.is_empty() {
            Vec::new()
        } else {
            let ids: Vec<Uuid> = rest.iter().map(|r| r.step_id).collect();
            let tokens: Vec<Uuid> = rest.iter().map(|r| r.lease_token).collect();
            match sqlx::query_file!("sql/claim_verdicts.sql", &ids, &tokens, millis(lease)).fetch_all(&self.pool).await {
                Ok(verdicts) => verdicts.into_iter().map(|v| verdict(&v.verdict, v.held_ms)).collect(),
                Err(e) => {
                    tracing::warn!(error = %e, "could not judge the messages that did not claim; they come back after the claim lease");
                    rest.iter().map(|_| held()).collect()
                }
            }
        }
        .into_iter();
        Ok(unique
            .iter()
            .map(|r| match claimed.remove(r) {
                Some(row) if row.remote_endpoint.is_some() => match &started {
                    Some(started) => {
                        let started_at = started.get(&row.id).copied();
                        ClaimOutcome::Claimed(Box::new(row.into_claimed(worker, started_at)))
                    }
                    None => held(),
                },
                Some(row) => ClaimOutcome::Claimed(Box::new(row.into_claimed(worker, None))),
                None => verdicts.next().unwrap_or(ClaimOutcome::UnknownStep),
            })
            .collect())
    }
}
