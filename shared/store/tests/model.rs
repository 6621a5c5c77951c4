//! The step state machine, model-checked: random sequences of operations (lease, claim with
//! the right, an old or a wrong token, succeed / fail / retry / heartbeat with the current or
//! a stale holder, expire the lease, reap, cancel) run against a real Postgres and against an
//! in-memory model built on `StepStatus::apply`. After every operation the step's row must
//! equal the model, and its fence may only grow. A second model drives map steps (fan-out)
//! through expansion, bounded children, partial failure and the gather.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use rara_domain::StepError;
use rara_domain::state::{StepStatus, Transition};
use rara_store::claim::{ClaimOutcome, ClaimRequest, ClaimedStep, MapPhase, StaleReason};
use rara_store::map::Expansion;
use rara_store::outcome::RetryVia;
use rara_store::{Holder, Store};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use uuid::Uuid;

const LEASE: Duration = Duration::from_secs(60);
const WORKERS: [&str; 2] = ["exec-1", "exec-2"];

#[derive(Debug, Clone, Copy)]
enum Token {
    Current,
    /// One seen earlier (the current one, or one an earlier lease issued).
    Seen(usize),
    Wrong,
}

#[derive(Debug, Clone, Copy)]
enum Who {
    /// The latest claim's holder.
    Latest,
    /// Any earlier claim's holder (a stale fence unless it is the latest).
    Seen(usize),
    /// The latest fence, another worker.
    Intruder,
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Lease,
    Claim(usize, Token),
    Succeed(Who),
    Fail(Who),
    Retry(Who, bool),
    Heartbeat(Who),
    Expire,
    Reap,
    Cancel,
}

fn token() -> impl Strategy<Value = Token> {
    prop_oneof![4 => Just(Token::Current), 2 => (0usize..8).prop_map(Token::Seen), 1 => Just(Token::Wrong)]
}

fn who() -> impl Strategy<Value = Who> {
    prop_oneof![4 => Just(Who::Latest), 2 => (0usize..8).prop_map(Who::Seen), 1 => Just(Who::Intruder)]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Lease),
        4 => (0usize..2, token()).prop_map(|(w, t)| Op::Claim(w, t)),
        2 => who().prop_map(Op::Succeed),
        1 => who().prop_map(Op::Fail),
        2 => (who(), any::<bool>()).prop_map(|(h, m)| Op::Retry(h, m)),
        1 => who().prop_map(Op::Heartbeat),
        2 => Just(Op::Expire),
        2 => Just(Op::Reap),
        1 => Just(Op::Cancel),
    ]
}

/// What the step should look like.
#[derive(Debug, Clone, PartialEq)]
struct Model {
    status: StepStatus,
    attempt: i32,
    max_attempts: i32,
    token: Option<Uuid>,
    leased_by: Option<String>,
    fence: Option<i64>,
    /// The lease ran out (only meaningful while the step holds one).
    expired: bool,
}

impl Model {
    fn go(&mut self, t: Transition) {
        self.status = self.status.apply(t).unwrap_or_else(|| panic!("the store did {t:?} from {}", self.status));
        if !self.status.holds_lease() {
            self.token = None;
            self.leased_by = None;
        }
    }

    fn holds(&self, h: &Holder) -> bool {
        self.status == StepStatus::Running
            && self.leased_by.as_deref() == Some(&h.worker)
            && self.fence == Some(h.fence)
    }
}

#[derive(Debug, PartialEq, sqlx::FromRow)]
struct Row {
    status: StepStatus,
    attempt: i32,
    lease_token: Option<Uuid>,
    leased_by: Option<String>,
    fence: Option<i64>,
    expired: Option<bool>,
}

struct Case<'a> {
    store: &'a Store,
    pool: &'a PgPool,
    step: Uuid,
    model: Model,
    tokens: Vec<Uuid>,
    holders: Vec<Holder>,
}

impl Case<'_> {
    fn holder(&self, who: Who) -> Holder {
        let fallback = Holder { step_id: self.step, worker: WORKERS[0].into(), fence: 0 };
        match who {
            Who::Latest => self.holders.last().cloned().unwrap_or(fallback),
            Who::Seen(i) if !self.holders.is_empty() => self.holders[i % self.holders.len()].clone(),
            Who::Seen(_) => fallback,
            Who::Intruder => Holder { worker: "intruder".into(), ..self.holder(Who::Latest) },
        }
    }

    async fn apply(&mut self, op: Op) -> Result<(), TestCaseError> {
        let m = &mut self.model;
        match op {
            Op::Lease => {
                let leased = self.store.lease_due("scheduler", 100, LEASE).await.unwrap();
                let ours = leased.iter().find(|l| l.step_id == self.step);
                prop_assert_eq!(ours.is_some(), m.status == StepStatus::Pending, "lease from {}", m.status);
                if let Some(l) = ours {
                    m.go(Transition::Lease);
                    m.token = Some(l.lease_token);
                    m.leased_by = Some("scheduler".into());
                    m.expired = false;
                    self.tokens.push(l.lease_token);
                }
            }
            Op::Claim(w, t) => {
                let lease_token = match t {
                    Token::Current => m.token.unwrap_or_else(Uuid::new_v4),
                    Token::Seen(i) if !self.tokens.is_empty() => self.tokens[i % self.tokens.len()],
                    _ => Uuid::new_v4(),
                };
                let expected = if m.status.is_terminal() {
                    "finished"
                } else if m.token != Some(lease_token) {
                    "token_mismatch"
                } else if m.attempt < m.max_attempts
                    && (m.status == StepStatus::Leased || (m.status == StepStatus::Running && m.expired))
                {
                    // A never-claimed lease stays claimable by its token until re-leased.
                    "claimed"
                } else if m.status == StepStatus::Running && m.expired {
                    "lease_expired"
                } else {
                    "held"
                };
                let outcome = self
                    .store
                    .claim(WORKERS[w], &[ClaimRequest { step_id: self.step, lease_token }], LEASE)
                    .await
                    .unwrap()
                    .remove(0);
                let got = match &outcome {
                    ClaimOutcome::Claimed(_) => "claimed",
                    ClaimOutcome::Stale(StaleReason::Finished) => "finished",
                    ClaimOutcome::Stale(StaleReason::TokenMismatch) => "token_mismatch",
                    ClaimOutcome::Stale(StaleReason::LeaseExpired) => "lease_expired",
                    ClaimOutcome::Stale(StaleReason::DuplicateInBatch) => "duplicate",
                    ClaimOutcome::Held { .. } => "held",
                    ClaimOutcome::UnknownStep => "unknown",
                };
                prop_assert_eq!(got, expected, "claim from {:?}", m);
                if let ClaimOutcome::Claimed(step) = outcome {
                    let fence = step.holder.fence;
                    prop_assert!(m.fence.is_none_or(|f| fence > f), "a claim's fence {} after {:?}", fence, m.fence);
                    m.go(Transition::Claim);
                    m.attempt += 1;
                    m.fence = Some(fence);
                    m.leased_by = Some(WORKERS[w].into());
                    m.expired = false;
                    prop_assert_eq!(step.attempt as i32, m.attempt);
                    self.holders.push(step.holder);
                }
            }
            Op::Succeed(who) => {
                let h = self.holder(who);
                let ok = self.store.succeed(&[(h.clone(), serde_json::json!({}))]).await.unwrap().remove(0).is_ok();
                let m = &mut self.model;
                prop_assert_eq!(ok, m.holds(&h), "succeed by {:?} from {:?}", h, m);
                if ok {
                    m.go(Transition::Succeed);
                }
            }
            Op::Fail(who) => {
                let h = self.holder(who);
                let error = StepError::permanent("BROKEN", "model failure");
                let ok = self.store.fail(&[(h.clone(), error)]).await.unwrap().remove(0).is_ok();
                let m = &mut self.model;
                prop_assert_eq!(ok, m.holds(&h), "fail by {:?} from {:?}", h, m);
                if ok {
                    m.go(Transition::Fail);
                }
            }
            Op::Retry(who, via_message) => {
                let h = self.holder(who);
                let via = if via_message { RetryVia::Message { lease: LEASE } } else { RetryVia::Postgres };
                let error = StepError::retryable("FLAKY", "model retry");
                let ok = self.store.retry(&[(h.clone(), error, Duration::ZERO)], via).await.unwrap().remove(0).is_ok();
                let m = &mut self.model;
                prop_assert_eq!(ok, m.holds(&h) && m.attempt < m.max_attempts, "retry by {:?} from {:?}", h, m);
                if ok {
                    m.go(if via_message { Transition::RetryViaMessage } else { Transition::RetryViaPostgres });
                    m.expired = false;
                }
            }
            Op::Heartbeat(who) => {
                let h = self.holder(who);
                let ok = self.store.heartbeat(&h, LEASE).await.is_ok();
                let m = &mut self.model;
                prop_assert_eq!(ok, m.holds(&h), "heartbeat by {:?} from {:?}", h, m);
                if ok {
                    m.expired = false;
                }
            }
            Op::Expire => {
                sqlx::query(
                    "UPDATE steps SET lease_expires_at = now() - interval '1 second'
                     WHERE id = $1 AND status IN ('leased', 'running')",
                )
                .bind(self.step)
                .execute(self.pool)
                .await
                .unwrap();
                if m.status.holds_lease() {
                    m.expired = true;
                }
            }
            Op::Reap => {
                let reaped = self.store.reap_expired(1000).await.unwrap();
                let expected = m.status.holds_lease() && m.expired;
                prop_assert_eq!(reaped.total(), u64::from(expected), "reap from {:?}", m);
                if expected {
                    let last_attempt = m.status == StepStatus::Running && m.attempt >= m.max_attempts;
                    m.go(if last_attempt { Transition::Fail } else { Transition::Reap });
                    m.expired = false;
                }
            }
            Op::Cancel => {
                let cancelled = self.store.cancel_step(self.step, "model cancel").await.unwrap();
                prop_assert_eq!(cancelled, m.status.apply(Transition::Cancel).is_some(), "cancel from {}", m.status);
                if cancelled {
                    m.go(Transition::Cancel);
                }
            }
        }
        self.compare().await
    }

    async fn compare(&self) -> Result<(), TestCaseError> {
        let row: Row = sqlx::query_as(
            "SELECT status, attempt, lease_token, leased_by, fence, lease_expires_at <= now() AS expired
             FROM steps WHERE id = $1",
        )
        .bind(self.step)
        .fetch_one(self.pool)
        .await
        .unwrap();
        let m = &self.model;
        let expected = Row {
            status: m.status,
            attempt: m.attempt,
            lease_token: m.token,
            leased_by: m.leased_by.clone(),
            fence: m.fence,
            expired: m.status.holds_lease().then_some(m.expired),
        };
        prop_assert_eq!(row, expected);
        let attempts: i64 = sqlx::query_scalar("SELECT count(*) FROM step_attempts WHERE step_id = $1")
            .bind(self.step)
            .fetch_one(self.pool)
            .await
            .unwrap();
        prop_assert_eq!(attempts, i64::from(m.attempt), "one attempt row per claim");
        Ok(())
    }
}

async fn run_case(store: &Store, pool: &PgPool, max_attempts: i32, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let plan =
        common::plan(&format!("name: model\nsteps:\n  - {{name: s, operation: noop, max_attempts: {max_attempts}}}\n"));
    let run = store.submit(&plan).await.unwrap();
    let step = common::step_id(pool, run.run_id, "s").await;
    let model = Model {
        status: StepStatus::Pending,
        attempt: 0,
        max_attempts,
        token: None,
        leased_by: None,
        fence: None,
        expired: false,
    };
    let mut case = Case { store, pool, step, model, tokens: Vec::new(), holders: Vec::new() };
    let result = async {
        for op in ops {
            case.apply(op).await?;
        }
        Ok(())
    }
    .await;
    // Leave nothing due for the next case's leases.
    store.cancel_run(run.run_id, "case over").await.unwrap();
    result
}

/// Runs `cases` generated by `strategy` through `case`, each on the same scratch database
/// (migrated once, dropped at the end); panics with the minimal failing input.
fn check_cases<S: Strategy>(
    cases: u32,
    strategy: S,
    case: impl AsyncFn(&Store, &PgPool, S::Value) -> Result<(), TestCaseError>,
) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let base = std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let (server, _) = base.rsplit_once('/').unwrap();
    let name = format!("rara_model_{}", Uuid::new_v4().simple());
    let (admin, pool) = runtime.block_on(async {
        let admin = PgPoolOptions::new().max_connections(1).connect(&format!("{server}/postgres")).await.unwrap();
        sqlx::query(&format!("CREATE DATABASE {name}")).execute(&admin).await.unwrap();
        let pool = PgPoolOptions::new().max_connections(2).connect(&format!("{server}/{name}")).await.unwrap();
        rara_store::MIGRATOR.run(&pool).await.unwrap();
        (admin, pool)
    });
    let store = Store::new(pool.clone());
    let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
    let result = runner.run(&strategy, |value| runtime.block_on(case(&store, &pool, value)));
    runtime.block_on(async {
        pool.close().await;
        let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).execute(&admin).await;
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn the_store_follows_the_state_machine_model() {
    check_cases(32, (1i32..=3, prop::collection::vec(op(), 1..30)), async |store, pool, (max_attempts, ops)| {
        run_case(store, pool, max_attempts, ops).await
    });
}

/// A map step over `fates.len()` elements (child i succeeds when `fates[i]`), at most
/// `bound` at once, and a step after it, driven through the store as the executor drives it:
/// each round leases what is due, claims it, then ends the claims in the order `order`
/// shuffles them to (the map's first claim expands it, its second gathers; a child succeeds
/// or fails for good by its fate). Checked: the bound holds whenever children are leased; a
/// child starts only once the child `bound` places earlier succeeded; the map succeeds with
/// its children's outputs in order exactly when every fate is success, else it fails with
/// `MAP_CHILD_FAILED`, every child that started ended by its fate and every other one is
/// skipped, and the step after follows the map; the run's counters add up.
async fn map_case(
    store: &Store,
    pool: &PgPool,
    (fates, bound, order): (Vec<bool>, Option<u32>, Vec<prop::sample::Index>),
) -> Result<(), TestCaseError> {
    let size = fates.len();
    let list: Vec<usize> = (0..size).collect();
    let bound_yaml = bound.map(|n| format!(", max_concurrency: {n}")).unwrap_or_default();
    let plan = common::plan(&format!(
        "name: map\nsteps:\n  - {{name: m, operation: noop, max_attempts: 1, for_each: {list:?}{bound_yaml}, input: {{i: {{$item: ''}}}}}}\n  - {{name: after, operation: noop, depends_on: [m]}}\n"
    ));
    let run = store.submit(&plan).await.unwrap();
    let map = common::step_id(pool, run.run_id, "m").await;
    let mut started = vec![false; size];
    for round in 0..(4 * size + 8) {
        let leased = store.lease_due("scheduler", 100, LEASE).await.unwrap();
        if leased.is_empty() {
            break;
        }
        let busy: i64 =
            sqlx::query_scalar("SELECT count(*) FROM steps WHERE parent_id = $1 AND status IN ('leased', 'running')")
                .bind(map)
                .fetch_one(pool)
                .await
                .unwrap();
        if let Some(n) = bound {
            prop_assert!(busy <= i64::from(n), "round {}: {} children at once, bound {}", round, busy, n);
        }
        let requests: Vec<ClaimRequest> =
            leased.iter().map(|l| ClaimRequest { step_id: l.step_id, lease_token: l.lease_token }).collect();
        let mut claimed: Vec<ClaimedStep> = store
            .claim(WORKERS[0], &requests, LEASE)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|o| if let ClaimOutcome::Claimed(s) = o { Some(*s) } else { None })
            .collect();
        for (k, pick) in order.iter().enumerate().take(claimed.len()) {
            let j = k + pick.index(claimed.len() - k);
            claimed.swap(k, j);
        }
        for step in claimed {
            let h = step.holder.clone();
            match (&step.map, step.map_index) {
                (Some(MapPhase::Expand { .. }), _) => {
                    let children = (0..size).map(|i| serde_json::json!({ "i": i })).collect();
                    let expansion = Expansion { holder: h, name: step.name.clone(), children };
                    store.expand(&[expansion]).await.unwrap().remove(0).unwrap();
                }
                (Some(MapPhase::Gather { size: n, .. }), _) => {
                    prop_assert_eq!(*n as usize, size);
                    let outputs: Vec<serde_json::Value> =
                        sqlx::query_scalar("SELECT output FROM steps WHERE parent_id = $1 ORDER BY map_index")
                            .bind(map)
                            .fetch_all(pool)
                            .await
                            .unwrap();
                    store.succeed(&[(h, serde_json::Value::Array(outputs))]).await.unwrap().remove(0).unwrap();
                }
                (None, Some(i)) => {
                    let i = i as usize;
                    started[i] = true;
                    if let Some(n) = bound.map(|n| n as usize).filter(|n| i >= *n) {
                        let before: String = sqlx::query_scalar(
                            "SELECT status::text FROM steps WHERE parent_id = $1 AND map_index = $2",
                        )
                        .bind(map)
                        .bind((i - n) as i32)
                        .fetch_one(pool)
                        .await
                        .unwrap();
                        prop_assert_eq!(before, "succeeded", "child {} started before child {}", i, i - n);
                    }
                    if fates[i] {
                        store.succeed(&[(h, serde_json::json!({ "i": i }))]).await.unwrap().remove(0).unwrap();
                    } else {
                        let error = StepError::permanent("BROKEN", "model child failure");
                        store.fail(&[(h, error)]).await.unwrap().remove(0).unwrap();
                    }
                }
                (None, None) => {
                    store.succeed(&[(h, serde_json::json!({}))]).await.unwrap().remove(0).unwrap();
                }
            }
        }
    }

    let steps: Vec<(String, String, Option<serde_json::Value>, Option<serde_json::Value>)> = sqlx::query_as(
        "SELECT name, status::text, output, error FROM steps WHERE run_id = $1 ORDER BY position, map_index NULLS FIRST",
    )
    .bind(run.run_id)
    .fetch_all(pool)
    .await
    .unwrap();
    prop_assert_eq!(steps.len(), size + 2);
    let all_succeed = fates.iter().all(|f| *f);
    let (_, map_status, map_output, map_error) = &steps[0];
    if all_succeed {
        prop_assert_eq!(map_status, "succeeded");
        let expected: Vec<serde_json::Value> = (0..size).map(|i| serde_json::json!({ "i": i })).collect();
        prop_assert_eq!(map_output.clone(), Some(serde_json::Value::Array(expected)));
    } else {
        prop_assert_eq!(map_status, "failed");
        prop_assert_eq!(map_error.as_ref().map(|e| e["code"].clone()), Some(serde_json::json!("MAP_CHILD_FAILED")));
    }
    for (i, (name, status, _, _)) in steps[1..=size].iter().enumerate() {
        prop_assert_eq!(name, &format!("m[{i}]"));
        let expected = match (started[i], fates[i]) {
            (true, true) => "succeeded",
            (true, false) => "failed",
            (false, _) => "skipped",
        };
        prop_assert_eq!(status, expected, "child {}", i);
    }
    prop_assert_eq!(&steps[size + 1].1, if all_succeed { "succeeded" } else { "skipped" });
    let (status, total, unfinished, failed): (String, i32, i32, i32) = sqlx::query_as(
        "SELECT status::text, steps_total, steps_unfinished, steps_failed FROM workflow_runs WHERE id = $1",
    )
    .bind(run.run_id)
    .fetch_one(pool)
    .await
    .unwrap();
    let failed_children = (0..size).filter(|&i| started[i] && !fates[i]).count() as i32;
    let expected_failed = if all_succeed { 0 } else { failed_children + 1 };
    prop_assert_eq!(
        (status.as_str(), total, unfinished, failed),
        (if all_succeed { "succeeded" } else { "failed" }, size as i32 + 2, 0, expected_failed)
    );
    Ok(())
}

#[test]
fn map_steps_expand_bound_and_fail_as_the_model_says() {
    let fates = prop::collection::vec(prop::bool::weighted(0.85), 0..9);
    let bound = prop_oneof![Just(None), (1u32..=3).prop_map(Some)];
    let order = prop::collection::vec(any::<prop::sample::Index>(), 12);
    check_cases(48, (fates, bound, order), map_case);
}
