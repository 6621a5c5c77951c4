//! `remote`: the events of an `Execute` (or, resumed, `Attach`) stream through
//! [`EventOrder`], as the client feeds them (heartbeats skipped): events built in the
//! contract's order then mutated (a kind replaced or inserted, a sequence number off), every
//! field at its edges (fractions `NaN`, 4 MiB-scale messages, `size_bytes` `u64::MAX`, output
//! that is not JSON, error details with `retry_after_seconds` as text), and frames of bytes
//! (encoded events, cut or with a byte flipped) decoded as the transport does. Invariants: no
//! panic; the checker accepts exactly the contract's order, written here independently by
//! position (1 `accepted`, 2 `running`, then `progress`/`artifact` until one terminal event,
//! nothing after it, the sequence number equal to the position), refuses at the first event
//! that breaks it with a permanent `PROTOCOL_VIOLATION`, and a stream that ends before its
//! terminal event is a retryable `EXECUTOR_UNAVAILABLE`.

use std::collections::HashMap;

use proptest::prelude::*;
use prost::Message as _;
use rara_domain::step_error::codes;
use rara_remote::pb;
use rara_remote::pb::execute_response::Event;
use rara_remote::protocol::{EventOrder, Kind};

use super::values::{edge_text, json_value};
use crate::runner::Target;

#[derive(Debug)]
pub struct Remote;

#[derive(Debug, Clone)]
pub struct Input {
    /// `Some(after)`: an `Attach` stream resuming after event `after`.
    pub resume_after: Option<u64>,
    pub frames: Vec<Frame>,
}

#[derive(Debug, Clone)]
pub enum Frame {
    Event(pb::ExecuteResponse),
    /// Bytes off the wire; a frame that does not decode breaks the stream.
    Bytes(Vec<u8>),
}

fn artifact() -> impl Strategy<Value = pb::Artifact> {
    (edge_text(), edge_text(), edge_text(), any::<u64>(), edge_text()).prop_map(
        |(name, uri, media_type, size_bytes, digest)| pb::Artifact { name, uri, media_type, size_bytes, digest },
    )
}

fn error() -> impl Strategy<Value = Option<pb::Error>> {
    let details = prop::collection::hash_map(
        prop_oneof![Just("retry_after_seconds".to_owned()), "[a-z_]{0,12}"],
        edge_text(),
        0..4,
    );
    prop::option::weighted(
        0.9,
        (edge_text(), edge_text(), any::<bool>(), details).prop_map(
            |(code, message, retryable, details): (String, String, bool, HashMap<String, String>)| pb::Error {
                code,
                message,
                retryable,
                details,
            },
        ),
    )
}

/// The event of `kind` with arbitrary fields.
fn event_of(kind: Kind) -> BoxedStrategy<Event> {
    match kind {
        Kind::Accepted => Just(Event::Accepted(pb::Accepted {})).boxed(),
        Kind::Running => edge_text().prop_map(|v| Event::Running(pb::Running { capability_version: v })).boxed(),
        Kind::Progress => (prop_oneof![3 => 0.0f64..=1.0, 1 => any::<f64>()], edge_text())
            .prop_map(|(fraction, message)| Event::Progress(pb::Progress { fraction, message }))
            .boxed(),
        Kind::Artifact => artifact().prop_map(Event::Artifact).boxed(),
        Kind::Succeeded => (
            prop_oneof![2 => json_value().prop_map(|v| v.to_string()), 1 => edge_text()],
            prop::collection::vec(artifact(), 0..3),
        )
            .prop_map(|(output_json, artifacts)| Event::Succeeded(pb::Succeeded { output_json, artifacts }))
            .boxed(),
        Kind::Failed => error().prop_map(|error| Event::Failed(pb::Failed { error })).boxed(),
        Kind::Cancelled => edge_text().prop_map(|reason| Event::Cancelled(pb::Cancelled { reason })).boxed(),
    }
}

/// Kinds in the contract's order, then maybe one replaced or inserted.
fn kinds() -> impl Strategy<Value = Vec<Kind>> {
    use Kind::*;
    let any_kind = prop::sample::select(vec![Accepted, Running, Progress, Artifact, Succeeded, Failed, Cancelled]);
    let valid = (
        prop::collection::vec(prop::sample::select(vec![Progress, Artifact]), 0..8),
        prop::sample::select(vec![Succeeded, Failed, Cancelled]),
        any::<bool>(),
    )
        .prop_map(|(middle, terminal, ends)| {
            let mut kinds = vec![Accepted, Running];
            kinds.extend(middle);
            if ends {
                kinds.push(terminal);
            }
            kinds
        });
    let mutated = (valid.clone(), any::<prop::sample::Index>(), any_kind.clone(), any::<bool>()).prop_map(
        |(mut kinds, at, kind, insert)| {
            let at = at.index(kinds.len() + 1);
            if insert || at == kinds.len() {
                kinds.insert(at, kind);
            } else {
                kinds[at] = kind;
            }
            kinds
        },
    );
    prop_oneof![3 => valid, 3 => mutated, 1 => prop::collection::vec(any_kind, 0..10)]
}

/// A frame for the event at `position`: mostly the right sequence number, sometimes a
/// heartbeat before it, an empty event, or the event's bytes damaged.
fn frames(position: u64, kind: Kind) -> impl Strategy<Value = Vec<Frame>> {
    let sequence = prop_oneof![60 => Just(position), 1 => any::<u64>(), 1 => Just(position.saturating_sub(1))];
    let damage =
        prop_oneof![40 => Just(None), 1 => (any::<prop::sample::Index>(), any::<u8>(), any::<bool>()).prop_map(Some)];
    (sequence, event_of(kind), prop::bool::weighted(0.1), prop::bool::weighted(0.01), damage).prop_map(
        move |(sequence, event, heartbeat, blank, damage)| {
            let event = ExecuteResponse { sequence, timestamp: None, event: (!blank).then_some(event) };
            let mut frames = Vec::new();
            if heartbeat {
                frames.push(Frame::Event(ExecuteResponse {
                    sequence: 0,
                    timestamp: None,
                    event: Some(Event::Heartbeat(pb::Heartbeat {})),
                }));
            }
            frames.push(match damage {
                None => Frame::Event(event),
                Some((at, byte, cut)) => {
                    let mut bytes = event.encode_to_vec();
                    let i = at.index(bytes.len().max(1)).min(bytes.len());
                    if cut {
                        bytes.truncate(i);
                    } else if let Some(b) = bytes.get_mut(i) {
                        *b ^= byte;
                    }
                    Frame::Bytes(bytes)
                }
            });
            frames
        },
    )
}

use pb::ExecuteResponse;

impl Target for Remote {
    type Input = Input;

    fn name(&self) -> &'static str {
        "remote"
    }

    fn inputs(&self) -> BoxedStrategy<Input> {
        let resume_after =
            prop_oneof![4 => Just(None), 1 => (0u64..5).prop_map(Some), 1 => (0u64..1 << 40).prop_map(Some)];
        let structured = (resume_after, kinds()).prop_flat_map(|(resume_after, kinds)| {
            let first = resume_after.unwrap_or(0);
            let frames: Vec<_> = kinds
                .into_iter()
                .enumerate()
                .map(|(i, kind)| frames(first.saturating_add(i as u64 + 1), kind))
                .collect();
            frames.prop_map(move |frames| Input { resume_after, frames: frames.into_iter().flatten().collect() })
        });
        let raw = prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64).prop_map(Frame::Bytes), 0..6)
            .prop_map(|frames| Input { resume_after: None, frames });
        prop_oneof![6 => structured, 1 => raw].boxed()
    }

    fn check(&self, input: Input) -> Result<String, String> {
        let after = input.resume_after.unwrap_or(0);
        let mut order = input.resume_after.map_or_else(EventOrder::new, EventOrder::resume);
        let mut expected = Contract::new(after);
        for frame in input.frames {
            let event = match frame {
                Frame::Event(event) => event,
                Frame::Bytes(bytes) => match ExecuteResponse::decode(bytes.as_slice()) {
                    Ok(event) => event,
                    // The transport ends the call with a status: the client's EXECUTOR_UNAVAILABLE.
                    Err(_) => return Ok("stream broke: undecodable frame".into()),
                },
            };
            if matches!(event.event, Some(Event::Heartbeat(_))) {
                continue;
            }
            super::remote_fields::within_bounds(&event)?;
            let allowed = expected.next(&event);
            match (order.check(&event), allowed) {
                (Ok(_), true) => {}
                (Ok(kind), false) => return Err(format!("accepted {kind} at position {}", expected.position)),
                (Err(err), false) if err.code == codes::PROTOCOL_VIOLATION && !err.retryable => {
                    return Ok("violation".into());
                }
                (Err(err), _) => return Err(format!("refused at position {}: {err:?}", expected.position)),
            }
        }
        match (order.finish(), expected.terminal) {
            (Ok(kind), Some(terminal)) if kind == terminal => Ok(format!("completed: {kind}")),
            (Err(err), None) if err.code == codes::EXECUTOR_UNAVAILABLE && err.retryable => {
                Ok("ended before a terminal event".into())
            }
            (outcome, terminal) => Err(format!("finish gave {outcome:?}, the contract {terminal:?}")),
        }
    }
}

/// The contract's order by position, independent of the checker's phases.
struct Contract {
    position: u64,
    terminal: Option<Kind>,
}

impl Contract {
    fn new(after: u64) -> Self {
        Self { position: after, terminal: None }
    }

    /// Whether `event` may come next; moves on when it may.
    fn next(&mut self, event: &ExecuteResponse) -> bool {
        let position = self.position.saturating_add(1);
        let Some(kind) = Kind::of(event) else { return false };
        let allowed = self.terminal.is_none()
            && event.sequence == position
            && match position {
                1 => kind == Kind::Accepted,
                2 => kind == Kind::Running,
                _ => !matches!(kind, Kind::Accepted | Kind::Running),
            };
        if allowed {
            self.position = position;
            self.terminal = kind.is_terminal().then_some(kind);
        }
        allowed
    }
}
