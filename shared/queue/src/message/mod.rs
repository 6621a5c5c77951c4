//! The step message. Format 1 names one step: `{"v": 1, "step_id": "<uuid>", "lease_token":
//! "<uuid>"}`, its run's `traceparent` in a message attribute. Format 2 names several (a
//! scheduler with `RARA_STEPS_PER_MESSAGE` above 1 packs a lease round's steps, so that an
//! executor batch of ten messages claims and records up to ten times as many steps with the
//! same statements): `{"v": 2, "steps": [["<step id>", "<lease token>", "<traceparent>" or
//! null], …]}`. Only identifiers travel: no input, no secret. Anything else is rejected with a
//! reason. [`parse_steps`] reads both; [`encode_steps`] writes format 1 for one step, so a
//! scheduler that packs nothing writes what every earlier executor reads.
//!
//! # Layout
//!
//! - this file: the limits, [`StepMessage`] (format 1) and [`MessageStep`] (one step of either
//!   format, with its `traceparent`).
//! - `single.rs`: format 1, written and read ([`StepMessage::parse`]).
//! - `packed.rs`: either format by the number of steps ([`encode_steps`], [`parse_steps`]) and
//!   format 2's entries.
//! - `json.rs`: the strict reading both share (one object, no field twice, canonical UUIDs,
//!   rejections that never echo the body).
//! - `error.rs`: [`Error`], why a body is not a step message, with its code.

mod error;
mod json;
mod packed;
mod single;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use error::Error;
pub use packed::{encode_steps, parse_steps};

/// The format of a message that names one step.
pub const FORMAT_VERSION: u32 = 1;
/// The format of a message that names several steps.
pub const PACKED_VERSION: u32 = 2;
/// A step message is under 200 bytes; anything much larger is not one of ours.
pub const MAX_BODY_BYTES: usize = 4096;
/// The most steps one message names (`RARA_STEPS_PER_MESSAGE` is at most this).
pub const MAX_STEPS_PER_MESSAGE: usize = 100;
/// A packed step is under 140 bytes (two ids and a `traceparent`): the largest packed body.
pub const MAX_PACKED_BODY_BYTES: usize = 16 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepMessage {
    pub v: u32,
    pub step_id: Uuid,
    pub lease_token: Uuid,
}

/// One step a message names, with its run's `traceparent` when the body carries it (format 2;
/// a format-1 message carries it as an attribute).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageStep {
    pub message: StepMessage,
    pub traceparent: Option<String>,
}
