//! The checks, one rule group per file, each adding its checks to [`Suite`] as methods;
//! [`Suite::run`] here runs them in order.
//!
//! # Layout
//!
//! - `discovery.rs`: health and the offered capabilities ([`discovery::Offer`]).
//! - `order.rs`: sequence numbers and event order, on every stream the others read.
//! - `echo.rs`: `conformance.echo` on the wire (running version, progress, artifacts).
//! - `outcome.rs`: outputs and structured errors through rara's own client.
//! - `refusals.rs`: unknown operation or version, invalid input, a past deadline.
//! - `cancel.rs`: `Cancel` of running, chatty and unknown attempts; a dropped call.
//! - `deadline.rs`: a deadline reached mid-step.
//! - `heartbeat.rs`: heartbeats on a quiet stream.
//! - `detach.rs`: a detachable attempt outlives its call; `Attach` and its refusals.
//! - `auth.rs`: calls without the token; an attempt's secret guards `Cancel`, `Attach` and
//!   supersede.

mod auth;
mod cancel;
mod deadline;
mod detach;
mod discovery;
mod echo;
mod heartbeat;
mod order;
mod outcome;
mod refusals;

use crate::rules::Rule;
use crate::suite::Suite;
use crate::{CHATTY, ECHO, FAIL, SLEEP};

impl Suite {
    /// Every check, in order; when the conformance capabilities are not all offered, only
    /// the first two.
    pub(crate) async fn run(&mut self) {
        self.health().await;
        let Some(offers) = self.capabilities().await else {
            self.authentication().await;
            let unchecked = |r: &Rule| !matches!(r, Rule::Capabilities | Rule::Health | Rule::Authentication);
            for rule in Rule::ALL.into_iter().filter(unchecked) {
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
        self.authentication().await;
        self.attempt_secret(offers[SLEEP].detachable).await;
        if offers[SLEEP].detachable {
            self.detach().await;
        } else {
            for rule in [Rule::Detach, Rule::AttachRefusals] {
                self.findings.skipped(rule, format!("{SLEEP} does not advertise detachable"));
            }
        }
    }
}
