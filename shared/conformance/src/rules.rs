//! The rules of the `rara.v1` contract the suite checks, one [`Rule`] each, and what a run of
//! the suite found ([`Report`]).

use std::fmt;

/// One rule of the contract (proto/rara/v1/executor.proto), as the suite checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    /// `GetCapabilities` answers; every capability has a name and a SemVer version, each
    /// (name, version) once; the conformance capabilities are offered.
    Capabilities,
    /// The standard `grpc.health.v1` service answers SERVING for `rara.v1.ExecutorService`.
    Health,
    /// Every stream's sequence numbers start at 1 (or after `after_sequence`) and grow by one.
    Sequence,
    /// `accepted`, `running`, any `progress` and `artifact`, exactly one terminal event, then
    /// the end of the stream; on every stream, including refusals.
    Order,
    /// `running` names the version that runs: the newest offered when the request pins none,
    /// the pinned one otherwise; empty on a refusal (nothing ran).
    RunningVersion,
    /// Progress fractions lie within 0.0..=1.0.
    ProgressRange,
    /// `artifact` events have a name (unique within the attempt) and a URI; the terminal
    /// `Succeeded.artifacts` lists them, in order.
    Artifacts,
    /// Through rara's client, a success's output is a JSON object (`conformance.echo` answers
    /// `{"echo": <input>}`) and the running version reaches the reporter.
    OutputObject,
    /// Through rara's client, a handler failure arrives as a structured error: its code,
    /// message, retryable flag and details, both retryable and permanent.
    StructuredError,
    /// An operation the executor does not offer ends with `failed` UNKNOWN_OPERATION,
    /// retryable false.
    UnknownOperation,
    /// A pinned version the executor does not offer ends with `failed` UNKNOWN_OPERATION,
    /// retryable false.
    UnknownVersion,
    /// Input that is not a JSON object ends with `failed` INVALID_INPUT, retryable false.
    InvalidInput,
    /// `Cancel` of a running attempt answers found=true, and its stream then ends with
    /// `cancelled` carrying the request's reason.
    CancelRunning,
    /// The same for an attempt that keeps sending progress (`conformance.chatty`).
    CancelChatty,
    /// `Cancel` of an attempt the executor does not know, or of one that ended, answers
    /// found=false.
    CancelUnknown,
    /// A request whose deadline has passed ends with `failed` DEADLINE_EXCEEDED, retryable.
    DeadlinePast,
    /// A deadline reached mid-step ends the stream with `failed` DEADLINE_EXCEEDED
    /// (retryable) or `cancelled`, before the deadline plus `DEADLINE_GRACE`.
    DeadlineMidStep,
    /// Cancelling the `Execute` call of a non-detachable attempt (the client went away)
    /// stops it: a `Cancel` shortly after finds nothing running.
    CallCancellation,
    /// For a capability that advertises `detachable`: the attempt outlives its dropped call,
    /// `Attach` resumes right after the acknowledged sequence, and `Cancel` ends it with
    /// `cancelled` on the attached stream.
    Detach,
    /// For a detachable capability: `Attach` to an unknown attempt is NOT_FOUND, with an older
    /// fence FAILED_PRECONDITION.
    AttachRefusals,
    /// Asked for heartbeats (`heartbeat_interval_ms`), a stream that is quiet for longer sends
    /// `heartbeat` events: sequence 0, outside the order, the attempt's events unchanged.
    Heartbeat,
    /// With a token given to the suite: `GetCapabilities`, `Execute`, `Attach` and `Cancel`
    /// without it are refused with UNAUTHENTICATED.
    Authentication,
    /// `Cancel` presenting another secret than the attempt's `attempt_secret` is refused
    /// with PERMISSION_DENIED and stops nothing (also `Attach`, for a detachable
    /// capability); an `Execute` with a larger fence for the same step that does not vouch
    /// for the attempt (`prior_attempt_secrets`) does not stop it; the attempt's own secret
    /// then cancels it.
    AttemptSecret,
}

impl Rule {
    /// Every rule, in the order the report lists them.
    pub const ALL: [Rule; 23] = [
        Rule::Capabilities,
        Rule::Health,
        Rule::Sequence,
        Rule::Order,
        Rule::RunningVersion,
        Rule::ProgressRange,
        Rule::Artifacts,
        Rule::OutputObject,
        Rule::StructuredError,
        Rule::UnknownOperation,
        Rule::UnknownVersion,
        Rule::InvalidInput,
        Rule::CancelRunning,
        Rule::CancelChatty,
        Rule::CancelUnknown,
        Rule::DeadlinePast,
        Rule::DeadlineMidStep,
        Rule::CallCancellation,
        Rule::Detach,
        Rule::AttachRefusals,
        Rule::Heartbeat,
        Rule::Authentication,
        Rule::AttemptSecret,
    ];

    /// The rule's stable name, as the report prints it.
    pub fn id(self) -> &'static str {
        match self {
            Rule::Capabilities => "capabilities",
            Rule::Health => "health",
            Rule::Sequence => "sequence",
            Rule::Order => "order",
            Rule::RunningVersion => "running-version",
            Rule::ProgressRange => "progress-range",
            Rule::Artifacts => "artifacts",
            Rule::OutputObject => "output-object",
            Rule::StructuredError => "structured-error",
            Rule::UnknownOperation => "unknown-operation",
            Rule::UnknownVersion => "unknown-version",
            Rule::InvalidInput => "invalid-input",
            Rule::CancelRunning => "cancel-running",
            Rule::CancelChatty => "cancel-chatty",
            Rule::CancelUnknown => "cancel-unknown",
            Rule::DeadlinePast => "deadline-past",
            Rule::DeadlineMidStep => "deadline-mid-step",
            Rule::CallCancellation => "call-cancellation",
            Rule::Detach => "detach",
            Rule::AttachRefusals => "attach-refusals",
            Rule::Heartbeat => "heartbeat",
            Rule::Authentication => "authentication",
            Rule::AttemptSecret => "attempt-secret",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// What the suite found for one rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Checked, and every check held.
    Passed,
    /// Broken: what was seen, each violation on its own line.
    Violated(String),
    /// Not checked, and why (the endpoint advertises no detachable capability, or an earlier
    /// rule failed so the check could not start).
    Skipped(String),
}

/// One rule and its verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub rule: Rule,
    pub verdict: Verdict,
}

/// What one run of the suite found, rule by rule (in [`Rule::ALL`]'s order).
#[derive(Debug, Clone)]
pub struct Report {
    /// The endpoint checked.
    pub endpoint: String,
    pub checks: Vec<Check>,
}

impl Report {
    /// True when no rule was violated (skipped rules do not count against it).
    pub fn conforms(&self) -> bool {
        self.violations().next().is_none()
    }

    /// The violated rules.
    pub fn violations(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| matches!(c.verdict, Verdict::Violated(_)))
    }

    /// What was seen breaking `rule`, if it was broken.
    pub fn violation(&self, rule: Rule) -> Option<&str> {
        self.verdict(rule).and_then(|v| match v {
            Verdict::Violated(what) => Some(what.as_str()),
            _ => None,
        })
    }

    /// The verdict on `rule`.
    pub fn verdict(&self, rule: Rule) -> Option<&Verdict> {
        self.checks.iter().find(|c| c.rule == rule).map(|c| &c.verdict)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "rara.v1 conformance of {}:", self.endpoint)?;
        for check in &self.checks {
            match &check.verdict {
                Verdict::Passed => writeln!(f, "  pass  {}", check.rule)?,
                Verdict::Skipped(why) => writeln!(f, "  skip  {}: {why}", check.rule)?,
                Verdict::Violated(what) => {
                    writeln!(f, "  FAIL  {}", check.rule)?;
                    for line in what.lines() {
                        writeln!(f, "        {line}")?;
                    }
                }
            }
        }
        let failed = self.violations().count();
        if failed == 0 { write!(f, "conforms") } else { write!(f, "{failed} rule(s) violated") }
    }
}

/// Collects what the checks found, rule by rule.
#[derive(Debug, Default)]
pub(crate) struct Findings {
    exercised: Vec<Rule>,
    violations: Vec<(Rule, String)>,
    skipped: Vec<(Rule, String)>,
}

impl Findings {
    /// `rule` was checked (a violation recorded too still wins).
    pub(crate) fn checked(&mut self, rule: Rule) {
        self.exercised.push(rule);
    }

    /// `rule` was broken: `what` says how and where.
    pub(crate) fn violated(&mut self, rule: Rule, what: impl Into<String>) {
        self.violations.push((rule, what.into()));
    }

    /// `Ok` checks `rule`; `Err` violates it.
    pub(crate) fn record(&mut self, rule: Rule, outcome: Result<(), String>) {
        match outcome {
            Ok(()) => self.checked(rule),
            Err(what) => self.violated(rule, what),
        }
    }

    pub(crate) fn skipped(&mut self, rule: Rule, why: impl Into<String>) {
        self.skipped.push((rule, why.into()));
    }

    pub(crate) fn into_report(self, endpoint: &str) -> Report {
        let checks = Rule::ALL
            .into_iter()
            .map(|rule| {
                let seen: Vec<&str> =
                    self.violations.iter().filter(|(r, _)| *r == rule).map(|(_, w)| w.as_str()).collect();
                let verdict = if !seen.is_empty() {
                    Verdict::Violated(seen.join("\n"))
                } else if self.exercised.contains(&rule) {
                    Verdict::Passed
                } else {
                    let why = self.skipped.iter().find(|(r, _)| *r == rule).map(|(_, w)| w.clone());
                    Verdict::Skipped(why.unwrap_or_else(|| "not reached".into()))
                };
                Check { rule, verdict }
            })
            .collect();
        Report { endpoint: endpoint.to_owned(), checks }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_violation_wins_over_a_pass_and_unreached_rules_are_skipped() {
        let mut findings = Findings::default();
        findings.checked(Rule::Order);
        findings.violated(Rule::Order, "event #2 was succeeded; expected running");
        findings.checked(Rule::Health);
        findings.skipped(Rule::Detach, "no detachable capability");
        let report = findings.into_report("http://x:1");
        assert!(!report.conforms());
        assert_eq!(report.violation(Rule::Order), Some("event #2 was succeeded; expected running"));
        assert_eq!(report.verdict(Rule::Health), Some(&Verdict::Passed));
        assert_eq!(report.verdict(Rule::Detach), Some(&Verdict::Skipped("no detachable capability".into())));
        assert_eq!(report.verdict(Rule::Sequence), Some(&Verdict::Skipped("not reached".into())));
        assert_eq!(report.checks.len(), Rule::ALL.len());
        assert!(report.to_string().contains("FAIL  order"), "{report}");
    }
}
