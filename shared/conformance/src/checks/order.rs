//! [`Rule::Sequence`] and [`Rule::Order`], checked on every stream the other checks read.

use rara_remote::pb::{self};
use rara_remote::protocol::EventOrder;

use crate::rules::Rule;
use crate::stream::{End, Stream, kind_name};
use crate::suite::Suite;

impl Suite {
    /// [`Rule::Sequence`] and [`Rule::Order`] on everything `stream` received.
    pub(crate) fn check_stream(&mut self, stream: &Stream) {
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
}
