//! `conformance.echo` on the wire: [`Rule::RunningVersion`], [`Rule::ProgressRange`] and
//! [`Rule::Artifacts`].

use rara_remote::pb::execute_response::Event;
use rara_remote::pb::{self};
use serde_json::json;

use super::discovery::Offer;
use crate::attempt::{in_a_while, request};
use crate::rules::Rule;
use crate::stream::Stream;
use crate::suite::Suite;
use crate::{ECHO, STREAM_BOUND};

impl Suite {
    /// `conformance.echo` on the wire, unpinned and pinned: order, sequence, running version,
    /// progress and artifacts.
    pub(crate) async fn echo(&mut self, offer: &Offer) {
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
