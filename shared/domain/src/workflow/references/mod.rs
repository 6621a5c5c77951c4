//! References in a step's input (DESIGN.md "Data flow"): a step takes values from the steps it
//! depends on and from the run's inputs.
//!
//! - `{"$output": "fetch"}`: the whole output of the step `fetch`;
//! - `{"$output": "fetch", "pointer": "/body"}`: the part of it at a JSON Pointer (RFC 6901);
//! - `{"$artifact": "fetch", "name": "report"}`: the descriptor of `fetch`'s artifact `report`
//!   (`uri`, `media_type`, `size_bytes`, `digest`);
//! - `{"$input": "/date"}`: the part of the run's inputs at a JSON Pointer;
//! - `{"$item": "/url"}`: in a map step's input (the template of its children's), the part of
//!   the child's element at a JSON Pointer (`""`: the whole element). A map child's input is
//!   substituted whole when its map is expanded ([`substitute_child`]).
//!
//! [`scan`] finds them with their field paths; what submit refuses (a malformed reference, a
//! step that is not a dependency, direct or transitive, a run input that is not there) is
//! checked as the definition is planned (`workflow::planner::references`). [`substitute`]
//! replaces them with the values found, at claim.
//!
//! A value brought in is data. It is not searched for references again, and an object in it
//! that holds `$secret` is escaped (the key gets one more `$`: `$$secret`), so a step's output
//! can never make a dependent resolve a secret: secrets never flow through references.
//!
//! # Layout
//!
//! - `parse.rs`: the keys of the four forms, [`Reference`], [`Malformed`] and
//!   [`reference()`], which reads one.
//! - `scan.rs`: every reference of a value with its field path; the secret references
//!   a run's inputs may not hold.
//! - `substitute.rs`: [`Sources`], [`substitute`] and its variants, [`Missing`].
//!
//! Nothing here knows a workflow: the planner and the run's inputs use these, never the reverse.

mod parse;
mod scan;
mod substitute;

pub use parse::{
    ARTIFACT_KEY, INPUT_KEY, ITEM_KEY, Malformed, NAME_KEY, OUTPUT_KEY, POINTER_KEY, Reference, reference,
};
pub use scan::{Found, scan};
pub(crate) use scan::{join, secret_references};
pub use substitute::{Missing, Sources, substitute, substitute_child, substitute_in, substitute_output};
