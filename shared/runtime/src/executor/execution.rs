//! One claimed step: find its executor, give it a deadline, a cancellation signal and a
//! fenced reporter, heartbeat its lease and its message's visibility together, and turn
//! whatever happens (output, error, timeout, panic, lost lease) into an [`Execution`].
//!
//! A remote attempt of a detachable capability may outlive the invocation (DESIGN.md "Long
//! steps"): it runs to the step's own deadline, and at the invocation's end it is *parked*
//! ([`Execution::Parked`]): the executor lets go of it without stopping it, and the claim of
//! its returning message re-attaches. Any other execution ends with the invocation; one cut
//! there although its step allowed longer fails for good (`STEP_OUTLIVES_INVOCATION`).
//!
//! Secret references in the input are resolved here, just before the executor is called;
//! the resolved input is never logged or stored, and the output, the error, progress and
//! artifacts are redacted of the resolved values (see [`crate::secrets`]).

use std::sync::Arc;
use std::time::Duration;

use rara_domain::StepError;
use rara_domain::executor::{Detach, ExecutionContext, Resume, StopReason};
use rara_domain::registry::Registry;
use rara_domain::step_error::codes;
use rara_queue::Queue;
use rara_store::claim::ClaimedStep;
use rara_store::map::Expansion;
use rara_store::{Holder, Store};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;
use tracing::Instrument;

use crate::executor::reporter::{Loss, StoreReporter};
use crate::executor::returned;
use crate::secrets::{self, RedactingReporter, SecretResolver};

/// How an execution ended, before its outcome is recorded.
#[derive(Debug, Clone, PartialEq)]
pub enum Execution {
    Succeeded(serde_json::Value),
    Failed(StepError),
    /// The lease was lost (cancelled, reaped or taken over): write nothing more.
    LeaseLost,
    /// The runner is stopping and its grace is over: give the step back (fenced).
    Interrupted,
    /// The invocation ends (or the runner stops) while a detachable remote attempt runs: it
    /// goes on detached, here; park the step (fenced) so its message comes back to re-attach.
    Parked(Resume),
    /// A map step's first claim: create its children (fenced); it waits on them.
    Expanded(Expansion),
}

/// What an execution needs besides the step.
#[derive(Clone)]
pub struct Environment {
    pub store: Store,
    pub queue: Arc<dyn Queue>,
    pub registry: Arc<Registry>,
    pub lease: Duration,
    /// `RARA_ATTACH_WINDOW_SECONDS`: how long an executor stays attached to a detachable
    /// attempt before it parks it (`None`: until the invocation's end).
    pub attach_window: Option<Duration>,
    pub heartbeat_interval: Duration,
    pub progress_interval: Duration,
    /// `RARA_MAX_OUTPUT_BYTES` and friends: what an executor may return ([`rara_remote::bounds`]).
    pub returns: rara_remote::Limits,
    /// Resolves the input's `{"$secret": "name"}` references at execution.
    pub secrets: Arc<dyn SecretResolver>,
    /// Fired when a stopping runner's grace is over: executions still running stop and
    /// their steps are given back.
    pub interrupt: CancellationToken,
    /// The steps operators cancel: a heartbeat checks its lease at once when its step is one.
    pub cancels: crate::executor::cancel_watch::CancelWatch,
}

impl std::fmt::Debug for Environment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Environment").field("lease", &self.lease).finish_non_exhaustive()
    }
}

/// Runs `step` to an [`Execution`], never panicking and never outliving `deadline` (the
/// invocation's end minus the margin).
pub async fn execute(env: &Environment, step: &ClaimedStep, receipt_handle: &str, deadline: Instant) -> Execution {
    let executor = match &step.resume {
        Some(resume) => env.registry.attach(&resume.endpoint, &step.operation),
        None => env.registry.resolve(&step.operation, step.version.as_deref()).await,
    };
    let executor = match executor {
        Ok(executor) => executor,
        Err(error) => return Execution::Failed(error),
    };
    let timing = Timing::new(env, step, executor.detachable(), deadline);
    let secrets::Resolved { input, redactor } = match resolve_secrets(env, step, timing.run_until).await {
        Ok(resolved) => resolved,
        Err(error) => return Execution::Failed(error),
    };
    if !redactor.is_empty() {
        tracing::info!("secret references resolved");
    }
    let (ctx, lost, stop_reason) = context(env, step, timing.run_until, redactor.clone());
    let detach = ctx.detach.clone();

    // Both side tasks are aborted when this future ends or unwinds: no heartbeat outlives
    // its execution, and no executor keeps running for a step nobody records.
    let _heartbeat = AbortOnDropHandle::new(tokio::spawn(heartbeat(
        env.store.clone(),
        env.queue.clone(),
        step.holder.clone(),
        receipt_handle.to_owned(),
        env.lease,
        env.heartbeat_interval,
        Loss { lost: lost.clone(), reason: stop_reason.clone() },
        env.cancels.subscribe(),
    )));
    // In the step's span: the executor's lines carry its ids, its spans (the gRPC call) are
    // children of the execution.
    let mut task = AbortOnDropHandle::new(tokio::spawn(
        async move { executor.execute(ctx, input).await }.instrument(tracing::Span::current()),
    ));
    let park_time = async {
        match timing.park_at {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };

    tokio::select! {
        joined = &mut task => finished(joined, &detach, &lost, &redactor, &env.returns),
        _ = park_time => park(&mut task, &detach, &redactor, &env.returns).await,
        _ = tokio::time::sleep_until(timing.run_until) => {
            let (message, error) = past_deadline(step, timing.cut_by_invocation);
            stop_reason.set(message);
            lost.cancel();
            // A short moment for a remote executor's client to send `Cancel`: the margin
            // after the deadline is for recording the outcome.
            if tokio::time::timeout(DEADLINE_STOP_GRACE, &mut task).await.is_err() {
                task.abort();
            }
            Execution::Failed(error)
        }
        _ = lost.cancelled() => {
            stop(&mut task).await;
            Execution::LeaseLost
        }
        _ = env.interrupt.cancelled() => {
            if timing.park_at.is_some() && detach.resume_point().is_some() {
                tracing::info!("the runner is stopping and its grace is over; parking the detachable attempt");
                park(&mut task, &detach, &redactor, &env.returns).await
            } else {
                tracing::warn!("the runner is stopping and its grace is over; giving the step back");
                stop_reason.set("the executor is shutting down; the step will run again on another executor");
                lost.cancel();
                stop(&mut task).await;
                Execution::Interrupted
            }
        }
    }
}

/// When an execution ends, or is parked.
#[derive(Debug, Clone, Copy)]
struct Timing {
    /// The end of the execution: the step's own deadline for a detachable attempt (parked
    /// before it), else the sooner of that and the invocation's.
    run_until: Instant,
    /// When a detachable attempt is parked (`None`: not detachable, or it ends before).
    park_at: Option<Instant>,
    /// Whether the invocation's end, not the step's timeout, cuts the execution.
    cut_by_invocation: bool,
}

impl Timing {
    fn new(env: &Environment, step: &ClaimedStep, detachable: bool, deadline: Instant) -> Self {
        let step_deadline = step_deadline(step);
        // A detachable attempt runs to the step's own deadline and is parked at the
        // invocation's end, or when the attach window closes (Lambda time is paid only while
        // attached); any other execution ends with the invocation.
        let park_point = env.attach_window.map_or(deadline, |window| deadline.min(Instant::now() + window));
        let park_at = (detachable && step_deadline > park_point).then_some(park_point);
        let run_until = if park_at.is_some() { step_deadline } else { deadline.min(step_deadline) };
        Timing { run_until, park_at, cut_by_invocation: park_at.is_none() && step_deadline > deadline }
    }
}

/// The step's input with its secret references resolved, by `run_until`. Resolved for a
/// re-attach too: the attempt got the values when it started, and its output, errors and
/// reports are redacted of them.
async fn resolve_secrets(
    env: &Environment,
    step: &ClaimedStep,
    run_until: Instant,
) -> Result<secrets::Resolved, StepError> {
    // Granted first: an ungranted reference resolves nothing and sends nothing.
    let resolve = async {
        crate::grants::check(&env.store, step).await?;
        secrets::resolve(&step.input, env.secrets.as_ref()).await
    };
    match tokio::time::timeout_at(run_until, resolve).await {
        Ok(resolved) => resolved,
        Err(_) => Err(StepError::retryable(
            codes::SECRET_UNAVAILABLE,
            "the step's secrets could not be resolved before its deadline",
        )),
    }
}

/// The execution of an executor that returned (or whose task ended abnormally).
fn finished(
    joined: Result<Result<serde_json::Value, StepError>, tokio::task::JoinError>,
    detach: &Detach,
    lost: &CancellationToken,
    redactor: &secrets::Redactor,
    limits: &rara_remote::Limits,
) -> Execution {
    match joined {
        Ok(Ok(output)) => succeeded(output, redactor, limits),
        // It could not re-attach now (the endpoint did not answer): still detached.
        Ok(Err(_)) if detach.was_let_go() => parked(detach),
        Ok(Err(error)) if lost.is_cancelled() => {
            tracing::info!(code = %redactor.text(&error.code), "execution stopped after its lease was lost");
            Execution::LeaseLost
        }
        Ok(Err(error)) => Execution::Failed(redactor.error(error)),
        Err(join) => Execution::Failed(StepError::retryable(
            codes::EXECUTOR_PANICKED,
            if join.is_panic() { "the executor panicked" } else { "the executor task was aborted" },
        )),
    }
}

/// A success, unless the output is beyond its bound ([`returned::bounded`]).
fn succeeded(output: serde_json::Value, redactor: &secrets::Redactor, limits: &rara_remote::Limits) -> Execution {
    returned::bounded(output, redactor, limits).map_or_else(Execution::Failed, Execution::Succeeded)
}

/// Why an execution that reached its end without an outcome stops, and its failure: the
/// invocation's end cut a step whose timeout does not fit one (for good), or the step ran
/// past its deadline (retryable).
fn past_deadline(step: &ClaimedStep, cut_by_invocation: bool) -> (String, StepError) {
    if cut_by_invocation {
        let message = format!(
            "the step ran until its invocation's end, and its executor cannot detach: the step's timeout \
             ({}) does not fit one invocation (RARA_FUNCTION_TIMEOUT_SECONDS less RARA_DEADLINE_MARGIN_MS)",
            rara_domain::human::duration(step.timeout)
        );
        (message.clone(), StepError::permanent(codes::STEP_OUTLIVES_INVOCATION, message))
    } else {
        let message = format!(
            "the step ran past its deadline ({} step timeout, or the invocation's end)",
            rara_domain::human::duration(step.timeout)
        );
        (message.clone(), StepError::retryable(codes::DEADLINE_EXCEEDED, message))
    }
}

/// When the step's attempt must end: its timeout from the attempt's start (the claim, or an
/// earlier claim for a re-attached attempt; both on the database's clock).
fn step_deadline(step: &ClaimedStep) -> Instant {
    let elapsed = (step.attached_at - step.started_at).to_std().unwrap_or_default();
    Instant::now() + step.timeout.saturating_sub(elapsed)
}

/// Tells a detachable executor to let go of its attempt and waits (bounded) until it has: the
/// attempt goes on remotely. An outcome that arrived meanwhile is the execution's.
async fn park(
    task: &mut AbortOnDropHandle<Result<serde_json::Value, StepError>>,
    detach: &Detach,
    redactor: &secrets::Redactor,
    limits: &rara_remote::Limits,
) -> Execution {
    detach.park.cancel();
    match tokio::time::timeout(DEADLINE_STOP_GRACE, &mut *task).await {
        Ok(Ok(Ok(output))) => return succeeded(output, redactor, limits),
        Ok(Ok(Err(error))) if !detach.was_let_go() => return Execution::Failed(redactor.error(error)),
        Ok(_) => {}
        // Aborting drops the call, which a detachable attempt outlives.
        Err(_) => task.abort(),
    }
    parked(detach)
}

/// The detached attempt's resume point, or a retryable failure if the attempt never started
/// anywhere (nothing runs detached: a new attempt is the way on).
fn parked(detach: &Detach) -> Execution {
    match detach.resume_point() {
        Some(resume) => Execution::Parked(resume),
        None => Execution::Failed(StepError::retryable(
            codes::EXECUTOR_UNAVAILABLE,
            "the invocation ended before the remote attempt started",
        )),
    }
}

/// The context an executor runs with: a fenced, throttled, redacting reporter, and the
/// cancellation (with its reason) that a lost lease, the deadline or a shutdown fires.
fn context(
    env: &Environment,
    step: &ClaimedStep,
    deadline: Instant,
    redactor: secrets::Redactor,
) -> (ExecutionContext, CancellationToken, StopReason) {
    let lost = CancellationToken::new();
    let stop_reason = StopReason::default();
    let reporter = Arc::new(RedactingReporter {
        redactor,
        inner: Arc::new(StoreReporter::new(
            env.store.clone(),
            step.holder.clone(),
            env.progress_interval,
            Loss { lost: lost.clone(), reason: stop_reason.clone() },
            env.lease,
        )),
    });
    let ctx = ExecutionContext {
        run_id: step.run_id,
        step_id: step.holder.step_id,
        map_index: step.map_index,
        operation: step.operation.clone(),
        version: step.version.clone(),
        attempt: step.attempt,
        fence: step.holder.fence,
        deadline,
        cancel: lost.clone(),
        stop_reason: stop_reason.clone(),
        reporter,
        detach: Detach::new(step.resume.clone()),
    };

    (ctx, lost, stop_reason)
}

/// Gives a cancelled executor a moment to stop on its own (a remote one sends `Cancel`),
/// then aborts it.
async fn stop<T>(task: &mut AbortOnDropHandle<T>) {
    if tokio::time::timeout(STOP_GRACE, &mut *task).await.is_err() {
        task.abort();
    }
}

/// How long a cancelled executor may take to stop on its own.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// The same at the deadline, where the margin left is for recording the outcome.
const DEADLINE_STOP_GRACE: Duration = Duration::from_millis(500);

/// Extends the lease and the message's visibility together every `interval`, and at once when
/// `cancels` names the step (an operator cancelled it). A heartbeat that finds the lease gone
/// fires `lost`, which stops the execution (a remote one sends `Cancel` with the reason).
#[allow(clippy::too_many_arguments)]
async fn heartbeat(
    store: Store,
    queue: Arc<dyn Queue>,
    holder: Holder,
    receipt_handle: String,
    lease: Duration,
    interval: Duration,
    loss: Loss,
    mut cancels: crate::executor::cancel_watch::Subscription,
) {
    use tokio::sync::broadcast::error::RecvError;
    let mut ticker = tokio::time::interval_at(Instant::now() + interval, interval);
    let mut listening = true;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = loss.lost.cancelled() => return,
            cancelled = cancels.recv(), if listening => match cancelled {
                Ok(step_id) if step_id == holder.step_id => {
                    tracing::info!("the step was cancelled; checking the lease now");
                }
                // The listener just connected: a cancel may have come before.
                Ok(crate::executor::cancel_watch::CHECK_NOW) => {}
                Ok(_) => continue,
                // Some ids were missed: this step may be one of them.
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => {
                    listening = false;
                    continue;
                }
            },
        }
        // A heartbeat later than the lease is worthless: one that Postgres has not answered
        // within it fails, and the next tick tries again.
        match crate::timeouts::db_call(lease, store.heartbeat(&holder, lease)).await {
            Ok(_) => {
                if let Err(e) = queue.change_visibility(&receipt_handle, lease).await {
                    tracing::warn!(error = %e, "could not extend the message's visibility");
                }
            }
            Err(rara_store::Error::LeaseLost { .. }) => {
                loss.lose(&store, &holder).await;
                tracing::warn!(
                    reason = loss.reason.get().unwrap_or(""),
                    "heartbeat found the lease gone; stopping the execution"
                );
                return;
            }
            Err(e) => tracing::warn!(error = %e, "heartbeat failed; retrying at the next interval"),
        }
    }
}
