//! [`Stream`]: one `Execute` or `Attach` stream as a check reads it, and how its end is
//! described in a violation.

use std::time::Duration;

use rara_remote::pb::execute_response::Event;
use rara_remote::pb::{self};
use rara_remote::protocol::Kind;
use tokio::time::Instant;

use crate::END_OF_STREAM_GRACE;

/// How a stream ended, if it did.
#[derive(Debug)]
pub(crate) enum End {
    Finished,
    Broke(tonic::Status),
    TimedOut(Duration),
}

/// One `Execute` or `Attach` stream and what it received.
pub(crate) struct Stream {
    pub(crate) what: String,
    /// The `after_sequence` of an `Attach` (0 for `Execute`).
    pub(crate) after: u64,
    pub(crate) events: Vec<pb::ExecuteResponse>,
    /// The `heartbeat` events, apart: they are not events of the attempt.
    pub(crate) heartbeats: Vec<pb::ExecuteResponse>,
    inner: tonic::Streaming<pb::ExecuteResponse>,
    pub(crate) end: Option<End>,
}

impl Stream {
    pub(crate) fn new(what: &str, after: u64, inner: tonic::Streaming<pb::ExecuteResponse>) -> Self {
        Stream { what: what.to_owned(), after, events: Vec::new(), heartbeats: Vec::new(), inner, end: None }
    }

    /// Reads until `enough` holds, the stream ends, or `bound` passes; whether `enough` held.
    pub(crate) async fn read_until(&mut self, bound: Duration, enough: impl Fn(&Self) -> bool) -> bool {
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
    pub(crate) async fn read_to_end(&mut self, bound: Duration) {
        if self.read_until(bound, |s| s.terminal().is_some()).await {
            self.read_until(END_OF_STREAM_GRACE, |_| false).await;
        }
    }

    pub(crate) fn terminal(&self) -> Option<&Event> {
        self.events.iter().rev().find(|e| is_terminal(e)).and_then(|e| e.event.as_ref())
    }

    pub(crate) fn running_version(&self) -> Option<&str> {
        self.events.iter().find_map(|e| match &e.event {
            Some(Event::Running(running)) => Some(running.capability_version.as_str()),
            _ => None,
        })
    }

    pub(crate) fn count(&self, kind: Kind) -> usize {
        self.events.iter().filter(|e| Kind::of(e) == Some(kind)).count()
    }

    /// The kinds received, e.g. `accepted, running, progress ×3, succeeded`.
    pub(crate) fn kinds(&self) -> String {
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
    pub(crate) fn ending(&self) -> String {
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

pub(crate) fn kind_name(event: &pb::ExecuteResponse) -> String {
    Kind::of(event).map_or_else(|| "an event without a case".to_owned(), |k| k.to_string())
}

/// The terminal event, with its error's code and flag for `failed`.
pub(crate) fn describe_terminal(stream: &Stream) -> String {
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
pub(crate) fn expect_failed(stream: &Stream, code: &str, retryable: bool) -> Result<(), String> {
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
