//! The event order of an `Execute` stream, checked strictly: `accepted`, `running`, any number
//! of `progress` and `artifact`, exactly one of `succeeded`, `failed`, `cancelled`, then the end
//! of the stream; sequence numbers start at 1 and grow by one. Anything else is a permanent
//! `PROTOCOL_VIOLATION` whose message says what came when.

use rara_domain::StepError;
use rara_domain::step_error::codes;

use crate::pb::ExecuteResponse;
use crate::pb::execute_response::Event;

/// What an event is, without its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Accepted,
    Running,
    Progress,
    Artifact,
    Succeeded,
    Failed,
    Cancelled,
}

impl Kind {
    /// The kind of `event`, or `None` when the event carries none of the oneof's cases or
    /// is a `heartbeat` (outside the order: the client skips heartbeats before checking).
    pub fn of(event: &ExecuteResponse) -> Option<Self> {
        Some(match event.event.as_ref()? {
            Event::Heartbeat(_) => return None,
            Event::Accepted(_) => Self::Accepted,
            Event::Running(_) => Self::Running,
            Event::Progress(_) => Self::Progress,
            Event::Artifact(_) => Self::Artifact,
            Event::Succeeded(_) => Self::Succeeded,
            Event::Failed(_) => Self::Failed,
            Event::Cancelled(_) => Self::Cancelled,
        })
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Cancelled)
    }

    fn name(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Running => "running",
            Self::Progress => "progress",
            Self::Artifact => "artifact",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where the stream is in the contract's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Start,
    Accepted,
    Running,
    Ended(Kind),
}

impl Phase {
    fn expected(self) -> &'static str {
        match self {
            Self::Start => "accepted",
            Self::Accepted => "running",
            Self::Running => "progress, artifact, succeeded, failed or cancelled",
            Self::Ended(_) => "the end of the stream",
        }
    }
}

/// Checks one stream's events as they arrive. Feed every event to [`EventOrder::check`], then
/// call [`EventOrder::finish`] when the stream ends.
#[derive(Debug, Clone)]
pub struct EventOrder {
    phase: Phase,
    /// How many events were checked so far.
    seen: u64,
}

impl Default for EventOrder {
    fn default() -> Self {
        Self::new()
    }
}

impl EventOrder {
    pub fn new() -> Self {
        Self { phase: Phase::Start, seen: 0 }
    }

    /// The checker of an `Attach` stream that resumes after event `after` of the attempt: the
    /// attempt's own sequence numbers go on from there. `accepted` and `running` are always
    /// the attempt's events 1 and 2, so `after` tells the phase.
    pub fn resume(after: u64) -> Self {
        let phase = match after {
            0 => Phase::Start,
            1 => Phase::Accepted,
            _ => Phase::Running,
        };
        Self { phase, seen: after }
    }

    /// How many events were accepted so far.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// The terminal event's kind once it arrived.
    pub fn terminal(&self) -> Option<Kind> {
        match self.phase {
            Phase::Ended(kind) => Some(kind),
            _ => None,
        }
    }

    /// Accepts the next event or names the violation.
    pub fn check(&mut self, event: &ExecuteResponse) -> Result<Kind, StepError> {
        let position = self.seen + 1;
        let Some(kind) = Kind::of(event) else {
            return Err(violation(format!(
                "event #{position} (sequence {}) carries no event; expected {}",
                event.sequence,
                self.phase.expected()
            )));
        };
        if event.sequence != position {
            return Err(violation(format!(
                "event #{position} ({kind}) has sequence {}, expected {position}",
                event.sequence
            )));
        }
        let next = match (self.phase, kind) {
            (Phase::Start, Kind::Accepted) => Phase::Accepted,
            (Phase::Accepted, Kind::Running) => Phase::Running,
            (Phase::Running, Kind::Progress | Kind::Artifact) => Phase::Running,
            (Phase::Running, terminal) if terminal.is_terminal() => Phase::Ended(terminal),
            (Phase::Ended(ended), _) => {
                return Err(violation(format!(
                    "event #{position} ({kind}) came after the terminal event {ended}; expected {}",
                    self.phase.expected()
                )));
            }
            (phase, _) => {
                return Err(violation(format!("event #{position} was {kind}; expected {}", phase.expected())));
            }
        };
        self.phase = next;
        self.seen = position;
        Ok(kind)
    }

    /// The stream ended. `Ok` after a terminal event; before one the executor vanished
    /// mid-work, which is a retryable `EXECUTOR_UNAVAILABLE`.
    pub fn finish(&self) -> Result<Kind, StepError> {
        match self.phase {
            Phase::Ended(kind) => Ok(kind),
            phase => Err(StepError::retryable(
                codes::EXECUTOR_UNAVAILABLE,
                format!(
                    "the stream ended after {} event(s) without a terminal event; expected {}",
                    self.seen,
                    phase.expected()
                ),
            )),
        }
    }
}

fn violation(message: String) -> StepError {
    StepError::permanent(codes::PROTOCOL_VIOLATION, format!("remote executor broke the event order: {message}"))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::pb;

    fn event(sequence: u64, kind: Kind) -> ExecuteResponse {
        let event = match kind {
            Kind::Accepted => Event::Accepted(pb::Accepted {}),
            Kind::Running => Event::Running(pb::Running::default()),
            Kind::Progress => Event::Progress(pb::Progress { fraction: 0.5, message: String::new() }),
            Kind::Artifact => Event::Artifact(pb::Artifact::default()),
            Kind::Succeeded => Event::Succeeded(pb::Succeeded::default()),
            Kind::Failed => Event::Failed(pb::Failed::default()),
            Kind::Cancelled => Event::Cancelled(pb::Cancelled::default()),
        };
        ExecuteResponse { sequence, timestamp: None, event: Some(event) }
    }

    /// Runs `kinds` numbered 1, 2, … through a checker, then ends the stream.
    fn run(kinds: &[Kind]) -> Result<Kind, StepError> {
        let mut order = EventOrder::new();
        for (i, kind) in kinds.iter().enumerate() {
            order.check(&event(i as u64 + 1, *kind))?;
        }
        order.finish()
    }

    use Kind::*;

    #[test]
    fn an_attach_stream_goes_on_from_the_sequence_it_resumes_after() {
        let mut order = EventOrder::resume(5);
        assert!(order.check(&event(6, Progress)).is_ok());
        assert!(order.check(&event(7, Succeeded)).is_ok());
        assert!(order.finish().is_ok());
        // A gap, or a repeat of an acknowledged event, is a violation.
        let err = EventOrder::resume(5).check(&event(7, Progress)).unwrap_err();
        assert_eq!(err.code, codes::PROTOCOL_VIOLATION);
        assert!(EventOrder::resume(5).check(&event(5, Progress)).is_err());
        // Resuming before `running` still requires it.
        assert!(EventOrder::resume(1).check(&event(2, Progress)).is_err());
        assert!(EventOrder::resume(1).check(&event(2, Running)).is_ok());
    }

    #[test]
    fn the_contract_order_passes_with_every_terminal() {
        for terminal in [Succeeded, Failed, Cancelled] {
            assert_eq!(run(&[Accepted, Running, terminal]), Ok(terminal));
            assert_eq!(run(&[Accepted, Running, Progress, Artifact, Progress, terminal]), Ok(terminal));
        }
    }

    #[test]
    fn running_before_accepted_is_a_permanent_violation_naming_both() {
        let err = run(&[Running, Accepted, Succeeded]).unwrap_err();
        assert_eq!(err.code, codes::PROTOCOL_VIOLATION);
        assert!(!err.retryable);
        assert!(err.message.contains("event #1 was running; expected accepted"), "{}", err.message);
    }

    #[test]
    fn progress_before_running_is_a_violation() {
        let err = run(&[Accepted, Progress]).unwrap_err();
        assert!(err.message.contains("event #2 was progress; expected running"), "{}", err.message);
    }

    #[test]
    fn anything_after_the_terminal_event_is_a_violation() {
        let err = run(&[Accepted, Running, Succeeded, Progress]).unwrap_err();
        assert_eq!(err.code, codes::PROTOCOL_VIOLATION);
        assert!(err.message.contains("event #4 (progress) came after the terminal event succeeded"), "{}", err.message);
        let err = run(&[Accepted, Running, Succeeded, Failed]).unwrap_err();
        assert!(err.message.contains("event #4 (failed) came after the terminal event succeeded"), "{}", err.message);
    }

    #[test]
    fn sequence_numbers_must_start_at_one_and_grow_by_one() {
        let mut order = EventOrder::new();
        let err = order.check(&event(0, Accepted)).unwrap_err();
        assert!(err.message.contains("event #1 (accepted) has sequence 0, expected 1"), "{}", err.message);

        let mut order = EventOrder::new();
        order.check(&event(1, Accepted)).unwrap();
        let err = order.check(&event(3, Running)).unwrap_err();
        assert_eq!(err.code, codes::PROTOCOL_VIOLATION);
        assert!(err.message.contains("event #2 (running) has sequence 3, expected 2"), "{}", err.message);
    }

    #[test]
    fn an_event_without_a_case_is_a_violation() {
        let mut order = EventOrder::new();
        let err = order.check(&ExecuteResponse { sequence: 1, timestamp: None, event: None }).unwrap_err();
        assert_eq!(err.code, codes::PROTOCOL_VIOLATION);
        assert!(err.message.contains("carries no event"), "{}", err.message);
    }

    #[test]
    fn a_stream_ending_before_its_terminal_event_is_retryable_unavailability() {
        for kinds in [&[][..], &[Accepted], &[Accepted, Running, Progress]] {
            let err = run(kinds).unwrap_err();
            assert_eq!(err.code, codes::EXECUTOR_UNAVAILABLE);
            assert!(err.retryable);
        }
    }

    fn any_kind() -> impl Strategy<Value = Kind> {
        prop::sample::select(vec![Accepted, Running, Progress, Artifact, Succeeded, Failed, Cancelled])
    }

    /// The contract as a whole-sequence rule, written independently of the streaming checker.
    fn follows_contract(kinds: &[Kind]) -> bool {
        kinds.len() >= 3
            && kinds[0] == Accepted
            && kinds[1] == Running
            && kinds[kinds.len() - 1].is_terminal()
            && kinds[2..kinds.len() - 1].iter().all(|k| matches!(k, Progress | Artifact))
    }

    /// Random sequences biased towards the contract's shape, so both outcomes are common.
    fn sequences() -> impl Strategy<Value = Vec<Kind>> {
        let valid = (
            prop::collection::vec(prop::sample::select(vec![Progress, Artifact]), 0..6),
            prop::sample::select(vec![Succeeded, Failed, Cancelled]),
        )
            .prop_map(|(middle, terminal)| {
                let mut kinds = vec![Accepted, Running];
                kinds.extend(middle);
                kinds.push(terminal);
                kinds
            });
        let mutated =
            (valid.clone(), 0usize..10, any_kind(), any::<bool>()).prop_map(|(mut kinds, at, kind, insert)| {
                let at = at % (kinds.len() + 1);
                if insert || at == kinds.len() {
                    kinds.insert(at.min(kinds.len()), kind);
                } else {
                    kinds[at] = kind;
                }
                kinds
            });
        prop_oneof![valid, mutated, prop::collection::vec(any_kind(), 0..8)]
    }

    proptest! {
        #[test]
        fn checker_accepts_exactly_the_contract_order(kinds in sequences()) {
            let outcome = run(&kinds);
            if follows_contract(&kinds) {
                prop_assert_eq!(outcome, Ok(kinds[kinds.len() - 1]));
            } else {
                let err = outcome.unwrap_err();
                let ended_early = !kinds.iter().any(|k| k.is_terminal())
                    && kinds.iter().enumerate().all(|(i, k)| match i {
                        0 => *k == Accepted,
                        1 => *k == Running,
                        _ => matches!(k, Progress | Artifact),
                    });
                let expected = if ended_early { codes::EXECUTOR_UNAVAILABLE } else { codes::PROTOCOL_VIOLATION };
                prop_assert_eq!(err.code.as_str(), expected);
                prop_assert_eq!(err.retryable, ended_early);
            }
        }

        #[test]
        fn any_sequence_number_out_of_step_is_a_violation(shift in 1u64..5, at in 0usize..4, down in any::<bool>()) {
            let kinds = [Accepted, Running, Progress, Succeeded];
            let mut order = EventOrder::new();
            let mut failed = None;
            for (i, kind) in kinds.iter().enumerate() {
                let expected = i as u64 + 1;
                let sequence = if i == at { if down { expected.saturating_sub(shift) } else { expected + shift } } else { expected };
                if let Err(err) = order.check(&event(sequence, *kind)) {
                    failed = Some((i, err));
                    break;
                }
            }
            let (i, err) = failed.expect("a wrong sequence number must be refused");
            prop_assert_eq!(i, at);
            prop_assert_eq!(err.code.as_str(), codes::PROTOCOL_VIOLATION);
        }
    }
}
