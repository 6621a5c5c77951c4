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

use opentelemetry::context::FutureExt as _;
use rara_domain::StepError;
use rara_domain::executor::{Detach, ExecutionContext, StopReason};
use rara_domain::registry::Registry;
use rara_domain::step_error::codes;
use rara_queue::Queue;
use rara_store::claim::ClaimedStep;
use rara_store::{Holder, Store};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;
use tracing::Instrument;

use crate::executor::end::{self, Decision, Timing};
use crate::executor::reporter::{Loss, StoreReporter};
use crate::secrets::{self, RedactingReporter, SecretResolver};

pub use crate::executor::end::Execution;

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
    /// `RARA_ARTIFACTS_URI`, `RARA_INLINE_OUTPUT_BYTES`: where outputs beyond the inline bound
    /// go ([`crate::executor::offload`]).
    pub artifacts: crate::executor::offload::Offload,
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
    let timing = Timing::new(env.attach_window, step, executor.detachable(), deadline);
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
    // children of the execution; in its OpenTelemetry context (the attempt's, set by the
    // batch), which a remote executor's call propagates when rara does not export.
    let task = AbortOnDropHandle::new(tokio::spawn(
        async move { executor.execute(ctx, input).await }
            .instrument(tracing::Span::current())
            .with_context(opentelemetry::Context::current()),
    ));
    let execution = Running { task, detach, lost, stop_reason, redactor }.finish(env, step, &timing).await;
    // Under the lease still (the heartbeat runs until this function returns).
    env.artifacts.output(step, execution).await
}

/// An executor's task while it runs, and what stops it.
struct Running {
    task: AbortOnDropHandle<Result<serde_json::Value, StepError>>,
    detach: Detach,
    lost: CancellationToken,
    stop_reason: StopReason,
    redactor: secrets::Redactor,
}

impl Running {
    /// Waits for the first thing that happens (the executor returns, the park time, the end,
    /// a lost lease, the runner's interrupt); what it is, is decided from the facts
    /// ([`end::decide`]), never from which branch was polled first.
    async fn finish(mut self, env: &Environment, step: &ClaimedStep, timing: &Timing) -> Execution {
        let park_time = async {
            match timing.park_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let returned = tokio::select! {
            joined = &mut self.task => Some(joined),
            () = park_time => None,
            () = tokio::time::sleep_until(timing.run_until) => None,
            () = self.lost.cancelled() => None,
            () = env.interrupt.cancelled() => None,
        };
        let returned = match returned {
            Some(joined) => Some(joined),
            None => end::returned_now(&mut self.task).await,
        };
        let running = returned.is_none();
        let facts = end::Facts {
            now: Instant::now(),
            lost: self.lost.is_cancelled(),
            interrupted: env.interrupt.is_cancelled(),
            let_go: self.detach.was_let_go(),
        };
        match end::decide(returned, timing, &facts) {
            Decision::Output(output) => end::succeeded(output, &self.redactor, &env.returns),
            Decision::Failed(error) => Execution::Failed(self.redactor.error(error)),
            Decision::StillDetached => end::parked(&self.detach),
            Decision::LeaseLost => {
                if running {
                    stop(&mut self.task).await;
                }
                Execution::LeaseLost
            }
            Decision::End => {
                let (message, error) = end::past_deadline(step, timing.cut_by_invocation);
                self.stop_reason.set(message);
                self.lost.cancel();
                // A short moment for a remote executor's client to send `Cancel`: the margin
                // after the deadline is for recording the outcome.
                if running && tokio::time::timeout(end::DEADLINE_STOP_GRACE, &mut self.task).await.is_err() {
                    self.task.abort();
                }
                Execution::Failed(error)
            }
            Decision::Park => self.park(env).await,
            Decision::Interrupt if timing.park_at.is_some() && self.detach.resume_point().is_some() => {
                tracing::info!("the runner is stopping and its grace is over; parking the detachable attempt");
                self.park(env).await
            }
            Decision::Interrupt => {
                tracing::warn!("the runner is stopping and its grace is over; giving the step back");
                self.stop_reason.set("the executor is shutting down; the step will run again on another executor");
                self.lost.cancel();
                stop(&mut self.task).await;
                Execution::Interrupted
            }
        }
    }

    async fn park(&mut self, env: &Environment) -> Execution {
        end::park(&mut self.task, &self.detach, &self.redactor, &env.returns).await
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
        inner: Arc::new(
            StoreReporter::new(
                env.store.clone(),
                step.holder.clone(),
                env.progress_interval,
                Loss { lost: lost.clone(), reason: stop_reason.clone() },
                env.lease,
            )
            .with_artifacts(env.artifacts.store().cloned(), step.run_id, step.attempt),
        ),
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
        // A lost lease that came with a tick ends the heartbeat: no call for a lease gone.
        tokio::select! {
            biased;
            _ = loss.lost.cancelled() => return,
            _ = ticker.tick() => {}
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
