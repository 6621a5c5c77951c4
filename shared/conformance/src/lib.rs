//! The `rara.v1` conformance suite: drives any remote executor endpoint through rara's own
//! client ([`rara_remote`]) and checks every rule of the contract
//! (`proto/rara/v1/executor.proto`), one [`Rule`] each. The suite, not one implementation, is
//! the contract: rara's tests run it against the Python executor and against a minimal Rust
//! executor written from the proto alone, and a broken variant of the latter must fail it.
//!
//! # Running it against your executor
//!
//! Register the four conformance capabilities (below), start the executor, then either
//!
//! ```text
//! cargo run -p rara-conformance -- http://127.0.0.1:50051
//! ```
//!
//! (prints the report; exits 1 when a rule is violated), or call [`run`] from your own test:
//!
//! ```no_run
//! # async fn check() -> Result<(), rara_conformance::Error> {
//! let report = rara_conformance::run("http://127.0.0.1:50051").await?;
//! assert!(report.conforms(), "{report}");
//! # Ok(()) }
//! ```
//!
//! # The conformance capabilities
//!
//! The executor under test registers these, each at version `1.0.0` or later (SemVer); the
//! Python executor does with `--conformance` (or `RARA_WORKER_CONFORMANCE=1`):
//!
//! - [`ECHO`] `conformance.echo`: reports progress 0.5, then one artifact named `echo.json`,
//!   then succeeds with `{"echo": <input>}`.
//! - [`SLEEP`] `conformance.sleep`: input `{"seconds": N}`; reports progress at once and then
//!   at least every 250 ms, and succeeds after `seconds` with `{"slept_seconds": …}` unless
//!   cancelled, its call dropped or its deadline reached. May advertise `detachable`; the
//!   attach rules are checked only when it does.
//! - [`FAIL`] `conformance.fail`: input `{"code", "message", "retryable", "details"}` (details:
//!   string values); fails with exactly that error.
//! - [`CHATTY`] `conformance.chatty`: reports progress every 10 ms or more often, never ends
//!   on its own.
//!
//! # What it checks and how
//!
//! Wire rules (order, sequence numbers, `Cancel`'s answer, `Attach`) are checked on the raw
//! stream of the generated client, every stream through the client's own order checker
//! ([`rara_remote::protocol::EventOrder`]); outcome rules (the output, structured errors, the
//! recorded version) through [`rara_remote::RemoteExecutor`], exactly as a step runs. Every
//! check runs with its own fresh step id; nothing is shared between checks. A run takes a few
//! seconds (one step runs into a 1 s deadline).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rara_domain::executor::{Artifact, ExecutionContext, Executor, ReportError, Reporter};
use rara_domain::step_error::codes;
use rara_remote::RemoteExecutor;
use rara_remote::client::DEADLINE_GRACE;
use rara_remote::pb::execute_response::Event;
use rara_remote::pb::executor_service_client::ExecutorServiceClient;
use rara_remote::pb::{self};
use rara_remote::protocol::{EventOrder, Kind};
use serde_json::json;
use tokio::time::Instant;
use tonic::Code;
use tonic::transport::Channel;
use uuid::Uuid;

mod rules;

use rules::Findings;
pub use rules::{Check, Report, Rule, Verdict};

/// Reports progress 0.5, one artifact `echo.json`, then succeeds with `{"echo": <input>}`.
pub const ECHO: &str = "conformance.echo";
/// Sleeps `seconds`, reporting progress at least every 250 ms; stops when told to.
pub const SLEEP: &str = "conformance.sleep";
/// Fails with the structured error its input spells.
pub const FAIL: &str = "conformance.fail";
/// Reports progress every 10 ms or more often; never ends on its own.
pub const CHATTY: &str = "conformance.chatty";
/// The capabilities an executor under test registers.
pub const CAPABILITIES: [&str; 4] = [ECHO, SLEEP, FAIL, CHATTY];

/// How long a stream that should end soon may take to reach its end.
const STREAM_BOUND: Duration = Duration::from_secs(10);
/// How long a stopped attempt may take from `Cancel` to its `cancelled` event.
const STOP_BOUND: Duration = Duration::from_secs(5);
/// How long after its call is cancelled an attempt may still run.
const CALL_STOP_SETTLE: Duration = Duration::from_secs(1);
/// After the terminal event, how long the stream may stay open (as rara's client allows).
const END_OF_STREAM_GRACE: Duration = rara_remote::client::END_OF_STREAM_GRACE;
/// The deadline of the step that must run into it.
const SHORT_DEADLINE: Duration = Duration::from_secs(1);
/// The heartbeat interval the heartbeat check asks for: well under the gaps between a
/// `conformance.sleep`'s progress reports.
const HEARTBEAT_ASKED_MS: u32 = 50;

/// The endpoint cannot be dialled at all (a bad URL); anything the endpoint does is a
/// [`Verdict`] in the [`Report`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Endpoint(#[from] rara_remote::router::Error),
}

/// Runs every check against the executor at `endpoint` (`http://host:port` or
/// `https://host:port`) and reports each rule's verdict.
pub async fn run(endpoint: &str) -> Result<Report, Error> {
    let channel = rara_remote::router::lazy_channel(endpoint)?;
    let mut suite = Suite { endpoint: endpoint.to_owned(), channel, findings: Findings::default() };
    suite.run().await;
    Ok(suite.findings.into_report(endpoint))
}

/// One conformance capability as the endpoint offers it (its newest version).
#[derive(Debug, Clone)]
struct Offer {
    version: String,
    detachable: bool,
}

struct Suite {
    endpoint: String,
    channel: Channel,
    findings: Findings,
}

impl Suite {
    fn client(&self) -> ExecutorServiceClient<Channel> {
        ExecutorServiceClient::new(self.channel.clone())
    }

    async fn run(&mut self) {
        self.health().await;
        let Some(offers) = self.capabilities().await else {
            for rule in Rule::ALL.into_iter().filter(|r| !matches!(r, Rule::Capabilities | Rule::Health)) {
                self.findings.skipped(rule, "the conformance capabilities are not all offered");
            }
            return;
        };
        self.echo(&offers[ECHO]).await;
        self.through_client(&offers[ECHO], &offers[FAIL]).await;
        self.refusals().await;
        self.cancel_running(SLEEP, Rule::CancelRunning).await;
        self.cancel_running(CHATTY, Rule::CancelChatty).await;
        self.cancel_unknown().await;
        self.deadline_mid_step().await;
        self.call_cancellation().await;
        self.heartbeat().await;
        if offers[SLEEP].detachable {
            self.detach().await;
        } else {
            for rule in [Rule::Detach, Rule::AttachRefusals] {
                self.findings.skipped(rule, format!("{SLEEP} does not advertise detachable"));
            }
        }
    }

    /// [`Rule::Health`].
    async fn health(&mut self) {
        use tonic_health::pb::health_check_response::ServingStatus;
        let mut health = tonic_health::pb::health_client::HealthClient::new(self.channel.clone());
        let service = pb::executor_service_server::SERVICE_NAME.to_owned();
        let answer = tokio::time::timeout(STREAM_BOUND, health.check(tonic_health::pb::HealthCheckRequest { service }));
        let outcome = match answer.await {
            Ok(Ok(answer)) if answer.get_ref().status() == ServingStatus::Serving => Ok(()),
            Ok(Ok(answer)) => Err(format!("grpc.health.v1 Check answered {:?}", answer.get_ref().status())),
            Ok(Err(status)) => Err(format!("grpc.health.v1 Check failed: {:?}: {}", status.code(), status.message())),
            Err(_) => Err(format!("grpc.health.v1 Check did not answer within {STREAM_BOUND:?}")),
        };
        self.findings.record(Rule::Health, outcome);
    }

    /// [`Rule::Capabilities`]; the newest offer of each conformance capability, when all are
    /// offered.
    async fn capabilities(&mut self) -> Option<HashMap<&'static str, Offer>> {
        let mut client = self.client();
        let answer = tokio::time::timeout(STREAM_BOUND, client.get_capabilities(pb::GetCapabilitiesRequest {}));
        let capabilities = match answer.await {
            Ok(Ok(answer)) => answer.into_inner().capabilities,
            Ok(Err(status)) => {
                let what = format!("GetCapabilities failed: {:?}: {}", status.code(), status.message());
                self.findings.violated(Rule::Capabilities, what);
                return None;
            }
            Err(_) => {
                self.findings
                    .violated(Rule::Capabilities, format!("GetCapabilities did not answer within {STREAM_BOUND:?}"));
                return None;
            }
        };
        let mut problems = Vec::new();
        let mut seen: Vec<(&str, &str)> = Vec::new();
        for capability in &capabilities {
            let (name, version) = (capability.name.as_str(), capability.version.as_str());
            if name.is_empty() {
                problems.push(format!("a capability has no name (version {version:?})"));
            }
            if rara_remote::version::parse(version).is_none() {
                problems.push(format!("{name} has version {version:?}, which is not SemVer (MAJOR.MINOR.PATCH)"));
            }
            if seen.contains(&(name, version)) {
                problems.push(format!("{name} {version} is listed twice"));
            }
            seen.push((name, version));
        }
        let mut offers = HashMap::new();
        for name in CAPABILITIES {
            let newest = capabilities
                .iter()
                .filter(|c| c.name == name)
                .max_by(|a, b| rara_remote::version::compare(&a.version, &b.version));
            match newest {
                Some(c) => {
                    offers.insert(name, Offer { version: c.version.clone(), detachable: c.detachable });
                }
                None => problems.push(format!("{name} is not offered (register the conformance capabilities)")),
            }
        }
        let complete = offers.len() == CAPABILITIES.len();
        self.findings.record(Rule::Capabilities, if problems.is_empty() { Ok(()) } else { Err(problems.join("\n")) });
        complete.then_some(offers)
    }

    /// Opens `Execute` with rara's gRPC deadline (the request's deadline plus
    /// [`DEADLINE_GRACE`]); a call that cannot open violates `rule`.
    async fn execute(&mut self, rule: Rule, what: &str, request: pb::ExecuteRequest) -> Option<Stream> {
        let timeout = request
            .deadline
            .and_then(|d| SystemTime::try_from(d).ok())
            .and_then(|d| d.duration_since(SystemTime::now()).ok())
            .unwrap_or_default()
            + DEADLINE_GRACE;
        let mut call = tonic::Request::new(request);
        call.set_timeout(timeout);
        match self.client().execute(call).await {
            Ok(events) => Some(Stream::new(what, 0, events.into_inner())),
            Err(status) => {
                self.findings
                    .violated(rule, format!("{what}: the call failed: {:?}: {}", status.code(), status.message()));
                None
            }
        }
    }

    /// [`Rule::Sequence`] and [`Rule::Order`] on everything `stream` received.
    fn check_stream(&mut self, stream: &Stream) {
        let what = &stream.what;
        let mut sequence = Ok(());
        for (i, event) in stream.events.iter().enumerate() {
            let expected = stream.after + i as u64 + 1;
            if event.sequence != expected {
                sequence = Err(format!(
                    "{what}: event #{} ({}) has sequence {}, expected {expected}",
                    i + 1,
                    kind_name(event),
                    event.sequence
                ));
                break;
            }
        }
        self.findings.record(Rule::Sequence, sequence);
        // The order alone: the checker sees the events renumbered, so a bad number is
        // reported once, above.
        let mut order = EventOrder::resume(stream.after);
        let mut outcome = Ok(());
        for (i, event) in stream.events.iter().enumerate() {
            let renumbered = pb::ExecuteResponse { sequence: stream.after + i as u64 + 1, ..event.clone() };
            if let Err(err) = order.check(&renumbered) {
                outcome = Err(format!("{what}: {}", err.message));
                break;
            }
        }
        if outcome.is_ok() {
            outcome = match &stream.end {
                Some(End::Finished) => order.finish().map(drop).map_err(|err| format!("{what}: {}", err.message)),
                Some(End::Broke(status)) if order.terminal().is_none() => Err(format!(
                    "{what}: the stream broke before its terminal event ({}): {:?}: {}",
                    stream.kinds(),
                    status.code(),
                    status.message()
                )),
                Some(End::TimedOut(_)) if order.terminal().is_some() => {
                    Err(format!("{what}: the stream stayed open after its terminal event"))
                }
                _ => Ok(()),
            };
        }
        self.findings.record(Rule::Order, outcome);
    }

    /// `conformance.echo` on the wire, unpinned and pinned: order, sequence, running version,
    /// progress and artifacts.
    async fn echo(&mut self, offer: &Offer) {
        let input = json!({"conformance": "echo"}).to_string();
        let Some(mut stream) =
            self.execute(Rule::Order, "Execute conformance.echo", request(ECHO, "", &input, in_a_while())).await
        else {
            return;
        };
        stream.read_to_end(STREAM_BOUND).await;
        self.check_stream(&stream);
        let outcome = match stream.running_version() {
            Some(v) if v == offer.version => Ok(()),
            Some(v) => Err(format!(
                "unpinned {ECHO}: running says version {v:?}, but the newest offered is {:?}",
                offer.version
            )),
            None => Err(format!("unpinned {ECHO}: no running event")),
        };
        self.findings.record(Rule::RunningVersion, outcome);
        self.findings.record(Rule::ProgressRange, progress_range(&stream));
        self.findings.record(Rule::Artifacts, artifacts(&stream));
        if !matches!(stream.terminal(), Some(Event::Succeeded(_))) {
            let what = format!("{ECHO} did not succeed on the wire ({})", stream.kinds());
            self.findings.violated(Rule::OutputObject, what);
        }

        let what = format!("Execute {ECHO} pinned to {}", offer.version);
        let request = request(ECHO, &offer.version, &input, in_a_while());
        let Some(mut stream) = self.execute(Rule::RunningVersion, &what, request).await else { return };
        stream.read_to_end(STREAM_BOUND).await;
        self.check_stream(&stream);
        let outcome = match stream.running_version() {
            Some(v) if v == offer.version => Ok(()),
            other => Err(format!("{what}: running says version {other:?}")),
        };
        self.findings.record(Rule::RunningVersion, outcome);
    }

    /// The outcome rules through [`RemoteExecutor`], as a step runs.
    async fn through_client(&mut self, echo: &Offer, fail: &Offer) {
        let input = json!({"conformance": "echo", "list": [1, "two", null], "nested": {"ok": true}});
        let reporter = Arc::new(Recording::default());
        let executor = RemoteExecutor::new(self.channel.clone(), self.endpoint.clone(), ECHO, &echo.version);
        let outcome = match executor.execute(context(ECHO, reporter.clone()), input.clone()).await {
            Ok(output) if output == json!({ "echo": input }) => Ok(()),
            Ok(output) => Err(format!("{ECHO} answered {output}, expected {}", json!({ "echo": input }))),
            Err(err) => Err(format!("{ECHO} failed through rara's client: {}: {}", err.code, err.message)),
        };
        self.findings.record(Rule::OutputObject, outcome);
        let version = reporter.version.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let outcome = match version {
            Some(v) if v == echo.version => Ok(()),
            other => Err(format!("through rara's client, {ECHO} reported running version {other:?}")),
        };
        self.findings.record(Rule::RunningVersion, outcome);

        let executor = RemoteExecutor::new(self.channel.clone(), self.endpoint.clone(), FAIL, &fail.version);
        for retryable in [true, false] {
            let details = json!({"rule": "structured-error", "retryable": retryable.to_string()});
            let input = json!({
                "code": "CONFORMANCE_FAILURE", "message": "failed on purpose", "retryable": retryable,
                "details": details,
            });
            let outcome = match executor.execute(context(FAIL, Arc::new(Recording::default())), input).await {
                Ok(output) => Err(format!("{FAIL} succeeded with {output}")),
                Err(err)
                    if err.code == "CONFORMANCE_FAILURE"
                        && err.message == "failed on purpose"
                        && err.retryable == retryable
                        && err.details == details =>
                {
                    Ok(())
                }
                Err(err) => Err(format!(
                    "{FAIL} (retryable {retryable}) arrived as code {:?}, message {:?}, retryable {}, details {}",
                    err.code, err.message, err.retryable, err.details
                )),
            };
            self.findings.record(Rule::StructuredError, outcome);
        }
    }

    /// Requests the executor cannot run: each ends in order with the `failed` the proto says.
    async fn refusals(&mut self) {
        let past = Some(SystemTime::now() - Duration::from_secs(5));
        let cases = [
            (
                Rule::UnknownOperation,
                request("conformance.no-such-operation", "", "{}", in_a_while()),
                codes::UNKNOWN_OPERATION,
                false,
            ),
            (
                Rule::UnknownVersion,
                request(ECHO, "0.0.0-conformance.absent", "{}", in_a_while()),
                codes::UNKNOWN_OPERATION,
                false,
            ),
            (Rule::InvalidInput, request(ECHO, "", "[1, 2]", in_a_while()), "INVALID_INPUT", false),
            (Rule::DeadlinePast, request(ECHO, "", "{}", past), codes::DEADLINE_EXCEEDED, true),
        ];
        for (rule, request, code, retryable) in cases {
            let what = format!("Execute for {rule}");
            // A past deadline gets the bound's time on the wire, not none.
            let mut call = tonic::Request::new(request);
            call.set_timeout(STREAM_BOUND);
            let mut stream = match self.client().execute(call).await {
                Ok(events) => Stream::new(&what, 0, events.into_inner()),
                Err(status) => {
                    let what = format!("{what}: the call failed: {:?}: {}", status.code(), status.message());
                    self.findings.violated(rule, what);
                    continue;
                }
            };
            stream.read_to_end(STREAM_BOUND).await;
            self.check_stream(&stream);
            self.findings.record(rule, expect_failed(&stream, code, retryable));
            // Nothing ran: no version to record on the attempt.
            let outcome = match stream.running_version() {
                Some(v) if !v.is_empty() => Err(format!("{what}: refused, yet running names version {v:?}")),
                _ => Ok(()),
            };
            self.findings.record(Rule::RunningVersion, outcome);
        }
    }

    /// [`Rule::CancelRunning`] (or [`Rule::CancelChatty`]) and, once it ended, a second
    /// `Cancel` of the same attempt ([`Rule::CancelUnknown`]).
    async fn cancel_running(&mut self, operation: &str, rule: Rule) {
        let what = format!("Execute {operation} then Cancel");
        let request = request(
            operation,
            "",
            &json!({"seconds": 60}).to_string(),
            Some(SystemTime::now() + Duration::from_secs(60)),
        );
        let step_id = request.step_id.clone();
        let Some(mut stream) = self.execute(rule, &what, request).await else { return };
        if !stream.read_until(STREAM_BOUND, |s| s.running_version().is_some() && s.count(Kind::Progress) > 0).await {
            self.findings.violated(
                rule,
                format!("{what}: no running and progress within {STREAM_BOUND:?} ({})", stream.kinds()),
            );
            self.check_stream(&stream);
            return;
        }
        let reason = format!("conformance: {rule}");
        match self.cancel(&step_id, &reason).await {
            Ok(true) => {}
            Ok(false) => {
                self.findings.violated(rule, format!("{what}: Cancel of the running attempt answered found=false"))
            }
            Err(err) => self.findings.violated(rule, format!("{what}: {err}")),
        }
        let cancelled_at = Instant::now();
        stream.read_to_end(STOP_BOUND).await;
        self.check_stream(&stream);
        let outcome = match stream.terminal() {
            Some(Event::Cancelled(c)) if c.reason == reason => Ok(()),
            Some(Event::Cancelled(c)) => {
                Err(format!("{what}: cancelled says {:?}, not the Cancel's reason {reason:?}", c.reason))
            }
            Some(_) => Err(format!("{what}: the stream ended with {} after Cancel, not cancelled", stream.kinds())),
            None => {
                Err(format!("{what}: no terminal event {:?} after Cancel ({})", cancelled_at.elapsed(), stream.kinds()))
            }
        };
        self.findings.record(rule, outcome);
        let outcome = match self.cancel(&step_id, "conformance: again").await {
            Ok(false) => Ok(()),
            Ok(true) => Err(format!("{what}: a second Cancel, after the attempt ended, answered found=true")),
            Err(err) => Err(format!("{what}: {err}")),
        };
        self.findings.record(Rule::CancelUnknown, outcome);
    }

    /// [`Rule::CancelUnknown`] for an attempt the executor never saw.
    async fn cancel_unknown(&mut self) {
        let outcome = match self.cancel(&Uuid::new_v4().to_string(), "conformance: unknown").await {
            Ok(false) => Ok(()),
            Ok(true) => Err("Cancel of an attempt the executor never saw answered found=true".to_owned()),
            Err(err) => Err(err),
        };
        self.findings.record(Rule::CancelUnknown, outcome);
    }

    /// [`Rule::DeadlineMidStep`]: a sleep that runs into a 1 s deadline.
    async fn deadline_mid_step(&mut self) {
        let what = format!("Execute {SLEEP} with a deadline {SHORT_DEADLINE:?} ahead");
        let deadline = SystemTime::now() + SHORT_DEADLINE;
        let request = request(SLEEP, "", &json!({"seconds": 60}).to_string(), Some(deadline));
        let Some(mut stream) = self.execute(Rule::DeadlineMidStep, &what, request).await else { return };
        // The call's own gRPC deadline (the attempt's plus the grace) ends it in any case.
        stream.read_to_end(SHORT_DEADLINE + DEADLINE_GRACE + STOP_BOUND).await;
        self.check_stream(&stream);
        let late = SystemTime::now().duration_since(deadline).unwrap_or_default();
        let outcome = match stream.terminal() {
            Some(Event::Failed(pb::Failed { error: Some(e) })) if e.code == codes::DEADLINE_EXCEEDED && e.retryable => {
                Ok(())
            }
            Some(Event::Cancelled(_)) => Ok(()),
            Some(_) => Err(format!(
                "{what}: ended with {}, expected failed DEADLINE_EXCEEDED (retryable) or cancelled",
                describe_terminal(&stream)
            )),
            None => Err(format!(
                "{what}: no terminal event by {late:?} after the deadline (the grace is {DEADLINE_GRACE:?}); {}",
                stream.ending()
            )),
        };
        self.findings.record(Rule::DeadlineMidStep, outcome);
    }

    /// [`Rule::Heartbeat`]: a second of `conformance.sleep` (progress every 200–250 ms) with a
    /// heartbeat asked every 50 ms.
    async fn heartbeat(&mut self) {
        let what = format!("Execute {SLEEP} for 1 s with heartbeat_interval_ms {HEARTBEAT_ASKED_MS}");
        let mut request = request(SLEEP, "", &json!({"seconds": 1}).to_string(), in_a_while());
        request.heartbeat_interval_ms = HEARTBEAT_ASKED_MS;
        let Some(mut stream) = self.execute(Rule::Heartbeat, &what, request).await else { return };
        stream.read_to_end(STREAM_BOUND).await;
        self.check_stream(&stream);
        let outcome = if stream.heartbeats.is_empty() {
            Err(format!("{what}: no heartbeat in the quiet stretches between progress reports; {}", stream.ending()))
        } else if let Some(h) = stream.heartbeats.iter().find(|h| h.sequence != 0) {
            Err(format!("{what}: a heartbeat carried sequence {}, expected 0", h.sequence))
        } else if !matches!(stream.terminal(), Some(Event::Succeeded(_))) {
            Err(format!("{what}: ended with {}, expected succeeded", describe_terminal(&stream)))
        } else {
            Ok(())
        };
        self.findings.record(Rule::Heartbeat, outcome);
    }

    /// [`Rule::CallCancellation`]: the client goes away from a running, non-detachable attempt.
    async fn call_cancellation(&mut self) {
        let what = format!("Execute {SLEEP}, then the call dropped");
        let request =
            request(SLEEP, "", &json!({"seconds": 60}).to_string(), Some(SystemTime::now() + Duration::from_secs(60)));
        let step_id = request.step_id.clone();
        let Some(mut stream) = self.execute(Rule::CallCancellation, &what, request).await else { return };
        if !stream.read_until(STREAM_BOUND, |s| s.running_version().is_some()).await {
            self.findings.violated(Rule::CallCancellation, format!("{what}: no running event ({})", stream.kinds()));
            return;
        }
        self.check_stream(&stream);
        drop(stream);
        tokio::time::sleep(CALL_STOP_SETTLE).await;
        let outcome = match self.cancel(&step_id, "conformance: after the call was dropped").await {
            Ok(false) => Ok(()),
            Ok(true) => Err(format!(
                "{what}: the attempt still ran {CALL_STOP_SETTLE:?} after its call was cancelled (Cancel found it)"
            )),
            Err(err) => Err(format!("{what}: {err}")),
        };
        self.findings.record(Rule::CallCancellation, outcome);
    }

    /// [`Rule::Detach`] and [`Rule::AttachRefusals`] for a detachable `conformance.sleep`.
    async fn detach(&mut self) {
        const FENCE: i64 = 5;
        let what = format!("Execute {SLEEP} detachable, call dropped, then Attach");
        let mut request =
            request(SLEEP, "", &json!({"seconds": 60}).to_string(), Some(SystemTime::now() + Duration::from_secs(60)));
        request.detachable = true;
        request.fence = FENCE;
        let step_id = request.step_id.clone();
        let Some(mut stream) = self.execute(Rule::Detach, &what, request).await else { return };
        if !stream.read_until(STREAM_BOUND, |s| s.running_version().is_some() && s.count(Kind::Progress) > 0).await {
            self.findings.violated(Rule::Detach, format!("{what}: no running and progress ({})", stream.kinds()));
            return;
        }
        self.check_stream(&stream);
        let after = stream.events.last().map_or(0, |e| e.sequence);
        drop(stream);
        tokio::time::sleep(Duration::from_millis(500)).await;

        let refusals = [
            (Uuid::new_v4().to_string(), FENCE, Code::NotFound, "an attempt the executor never saw"),
            (step_id.clone(), FENCE - 1, Code::FailedPrecondition, "an older fence"),
        ];
        for (step, fence, expected, case) in refusals {
            let outcome = match self.attach(&step, fence, after).await {
                Ok(_) => Err(format!("Attach with {case} was accepted; expected {expected:?}")),
                Err(status) if status.code() == expected => Ok(()),
                Err(status) => Err(format!("Attach with {case} answered {:?}; expected {expected:?}", status.code())),
            };
            self.findings.record(Rule::AttachRefusals, outcome);
        }

        let mut attached = match self.attach(&step_id, FENCE, after).await {
            Ok(events) => Stream::new(&format!("Attach after sequence {after}"), after, events),
            Err(status) => {
                let what = format!("{what}: Attach failed: {:?}: {}", status.code(), status.message());
                self.findings.violated(Rule::Detach, what);
                return;
            }
        };
        if !attached.read_until(STREAM_BOUND, |s| !s.events.is_empty()).await {
            self.findings.violated(Rule::Detach, format!("{what}: no event after re-attaching; {}", attached.ending()));
        }
        let reason = "conformance: detach".to_owned();
        match self.cancel(&step_id, &reason).await {
            Ok(true) => {}
            Ok(false) => self
                .findings
                .violated(Rule::Detach, format!("{what}: Cancel of the detached attempt answered found=false")),
            Err(err) => self.findings.violated(Rule::Detach, format!("{what}: {err}")),
        }
        attached.read_to_end(STOP_BOUND).await;
        self.check_stream(&attached);
        let outcome = match attached.terminal() {
            Some(Event::Cancelled(c)) if c.reason == reason => Ok(()),
            _ => Err(format!(
                "{what}: the attached stream ended with {} after Cancel, not cancelled with its reason",
                describe_terminal(&attached)
            )),
        };
        self.findings.record(Rule::Detach, outcome);
    }

    async fn attach(
        &self,
        step_id: &str,
        fence: i64,
        after: u64,
    ) -> Result<tonic::Streaming<pb::ExecuteResponse>, tonic::Status> {
        let request = pb::AttachRequest {
            step_id: step_id.to_owned(),
            attempt: 1,
            fence,
            after_sequence: after,
            ..Default::default()
        };
        let mut call = tonic::Request::new(request);
        call.set_timeout(Duration::from_secs(60));
        self.client().attach(call).await.map(tonic::Response::into_inner)
    }

    /// `Cancel` of attempt 1 of `step_id`: `Ok(found)`, or what went wrong, said.
    async fn cancel(&self, step_id: &str, reason: &str) -> Result<bool, String> {
        let step = Uuid::parse_str(step_id).map_err(|e| e.to_string())?;
        rara_remote::cancel::cancel(self.client(), step, 1, reason, STREAM_BOUND)
            .await
            .map_err(|err| format!("Cancel was not answered: {err}"))
    }
}

/// How a stream ended, if it did.
#[derive(Debug)]
enum End {
    Finished,
    Broke(tonic::Status),
    TimedOut(Duration),
}

/// One `Execute` or `Attach` stream and what it received.
struct Stream {
    what: String,
    /// The `after_sequence` of an `Attach` (0 for `Execute`).
    after: u64,
    events: Vec<pb::ExecuteResponse>,
    /// The `heartbeat` events, apart: they are not events of the attempt.
    heartbeats: Vec<pb::ExecuteResponse>,
    inner: tonic::Streaming<pb::ExecuteResponse>,
    end: Option<End>,
}

impl Stream {
    fn new(what: &str, after: u64, inner: tonic::Streaming<pb::ExecuteResponse>) -> Self {
        Stream { what: what.to_owned(), after, events: Vec::new(), heartbeats: Vec::new(), inner, end: None }
    }

    /// Reads until `enough` holds, the stream ends, or `bound` passes; whether `enough` held.
    async fn read_until(&mut self, bound: Duration, enough: impl Fn(&Self) -> bool) -> bool {
        let until = Instant::now() + bound;
        while !enough(self) {
            if self.end.is_some() {
                return false;
            }
            match tokio::time::timeout_at(until, self.inner.message()).await {
                Ok(Ok(Some(event))) if matches!(event.event, Some(Event::Heartbeat(_))) => self.heartbeats.push(event),
                Ok(Ok(Some(event))) => self.events.push(event),
                Ok(Ok(None)) => self.end = Some(End::Finished),
                Ok(Err(status)) => self.end = Some(End::Broke(status)),
                Err(_) => {
                    self.end = Some(End::TimedOut(bound));
                    return false;
                }
            }
        }
        true
    }

    /// Reads to the end of the stream, within `bound` for the terminal event and
    /// [`END_OF_STREAM_GRACE`] after it.
    async fn read_to_end(&mut self, bound: Duration) {
        if self.read_until(bound, |s| s.terminal().is_some()).await {
            self.read_until(END_OF_STREAM_GRACE, |_| false).await;
        }
    }

    fn terminal(&self) -> Option<&Event> {
        self.events.iter().rev().find(|e| is_terminal(e)).and_then(|e| e.event.as_ref())
    }

    fn running_version(&self) -> Option<&str> {
        self.events.iter().find_map(|e| match &e.event {
            Some(Event::Running(running)) => Some(running.capability_version.as_str()),
            _ => None,
        })
    }

    fn count(&self, kind: Kind) -> usize {
        self.events.iter().filter(|e| Kind::of(e) == Some(kind)).count()
    }

    /// The kinds received, e.g. `accepted, running, progress ×3, succeeded`.
    fn kinds(&self) -> String {
        let mut runs: Vec<(String, usize)> = Vec::new();
        for event in &self.events {
            let kind = kind_name(event);
            match runs.last_mut() {
                Some((last, n)) if *last == kind => *n += 1,
                _ => runs.push((kind, 1)),
            }
        }
        if runs.is_empty() {
            return "no events".into();
        }
        runs.iter().map(|(k, n)| if *n > 1 { format!("{k} ×{n}") } else { k.clone() }).collect::<Vec<_>>().join(", ")
    }

    /// The events received and how the stream ended, for a message.
    fn ending(&self) -> String {
        let end = match &self.end {
            Some(End::Finished) => "then the stream ended".to_owned(),
            Some(End::Broke(status)) => format!("then the stream broke: {:?}: {}", status.code(), status.message()),
            Some(End::TimedOut(bound)) => format!("then nothing for {bound:?}"),
            None => "the stream is still open".to_owned(),
        };
        format!("received {}, {end}", self.kinds())
    }
}

fn is_terminal(event: &pb::ExecuteResponse) -> bool {
    Kind::of(event).is_some_and(Kind::is_terminal)
}

fn kind_name(event: &pb::ExecuteResponse) -> String {
    Kind::of(event).map_or_else(|| "an event without a case".to_owned(), |k| k.to_string())
}

/// The terminal event, with its error's code and flag for `failed`.
fn describe_terminal(stream: &Stream) -> String {
    match stream.terminal() {
        Some(Event::Failed(pb::Failed { error: Some(e) })) => {
            format!("failed {} (retryable {}): {}", e.code, e.retryable, e.message)
        }
        Some(Event::Cancelled(c)) => format!("cancelled ({:?})", c.reason),
        Some(_) => stream.kinds(),
        None => stream.ending(),
    }
}

/// The stream ended with `failed` `code`, retryable as given, with a message.
fn expect_failed(stream: &Stream, code: &str, retryable: bool) -> Result<(), String> {
    match stream.terminal() {
        Some(Event::Failed(pb::Failed { error: Some(e) }))
            if e.code == code && e.retryable == retryable && !e.message.is_empty() =>
        {
            Ok(())
        }
        _ => Err(format!(
            "{}: ended with {}; expected failed {code} (retryable {retryable}) with a message",
            stream.what,
            describe_terminal(stream)
        )),
    }
}

/// [`Rule::ProgressRange`] on `conformance.echo`'s stream: it reports progress, within 0..=1.
fn progress_range(stream: &Stream) -> Result<(), String> {
    let fractions: Vec<f64> = stream
        .events
        .iter()
        .filter_map(|e| match &e.event {
            Some(Event::Progress(p)) => Some(p.fraction),
            _ => None,
        })
        .collect();
    if fractions.is_empty() {
        return Err(format!("{ECHO} sent no progress event (it reports 0.5)"));
    }
    match fractions.iter().find(|f| !(0.0..=1.0).contains(*f)) {
        Some(f) => Err(format!("{ECHO} reported progress {f}, outside 0.0..=1.0")),
        None => Ok(()),
    }
}

/// [`Rule::Artifacts`] on `conformance.echo`'s stream.
fn artifacts(stream: &Stream) -> Result<(), String> {
    let reported: Vec<&pb::Artifact> = stream
        .events
        .iter()
        .filter_map(|e| match &e.event {
            Some(Event::Artifact(a)) => Some(a),
            _ => None,
        })
        .collect();
    if !reported.iter().any(|a| a.name == "echo.json") {
        return Err(format!("{ECHO} reported no artifact named echo.json"));
    }
    if let Some(a) = reported.iter().find(|a| a.name.is_empty() || a.uri.is_empty()) {
        return Err(format!("an artifact event lacks a name or a uri (name {:?}, uri {:?})", a.name, a.uri));
    }
    let mut names: Vec<&str> = reported.iter().map(|a| a.name.as_str()).collect();
    names.sort_unstable();
    if names.windows(2).any(|w| w[0] == w[1]) {
        return Err(format!("artifact names repeat within the attempt: {names:?}"));
    }
    match stream.terminal() {
        Some(Event::Succeeded(s)) if s.artifacts.iter().eq(reported.iter().copied()) => Ok(()),
        Some(Event::Succeeded(s)) => Err(format!(
            "Succeeded.artifacts lists {:?}, but the artifact events were {:?}",
            s.artifacts.iter().map(|a| &a.name).collect::<Vec<_>>(),
            reported.iter().map(|a| &a.name).collect::<Vec<_>>()
        )),
        _ => Ok(()), // no success: reported under output-object
    }
}

/// A request for attempt 1 of a fresh step.
fn request(operation: &str, version: &str, input_json: &str, deadline: Option<SystemTime>) -> pb::ExecuteRequest {
    pb::ExecuteRequest {
        run_id: Uuid::new_v4().to_string(),
        step_id: Uuid::new_v4().to_string(),
        attempt: 1,
        fence: 1,
        operation: operation.to_owned(),
        capability_version: version.to_owned(),
        input_json: input_json.to_owned(),
        deadline: deadline.map(prost_types::Timestamp::from),
        ..Default::default()
    }
}

/// A deadline no check reaches.
fn in_a_while() -> Option<SystemTime> {
    Some(SystemTime::now() + Duration::from_secs(60))
}

/// The context of a fresh step's attempt 1, for [`RemoteExecutor`].
fn context(operation: &str, reporter: Arc<Recording>) -> ExecutionContext {
    ExecutionContext {
        run_id: Uuid::new_v4(),
        step_id: Uuid::new_v4(),
        map_index: None,
        operation: operation.to_owned(),
        version: None,
        attempt: 1,
        fence: 1,
        deadline: Instant::now() + Duration::from_secs(60),
        cancel: tokio_util::sync::CancellationToken::new(),
        stop_reason: Default::default(),
        reporter,
        detach: Default::default(),
    }
}

/// Keeps the version the client reports; progress and artifacts are checked on the wire.
#[derive(Debug, Default)]
struct Recording {
    version: Mutex<Option<String>>,
}

#[async_trait::async_trait]
impl Reporter for Recording {
    async fn progress(&self, _fraction: f64, _message: &str) -> Result<(), ReportError> {
        Ok(())
    }

    async fn artifact(&self, _artifact: Artifact) -> Result<(), ReportError> {
        Ok(())
    }

    async fn version(&self, version: &str) -> Result<(), ReportError> {
        *self.version.lock().unwrap_or_else(|p| p.into_inner()) = Some(version.to_owned());
        Ok(())
    }
}
