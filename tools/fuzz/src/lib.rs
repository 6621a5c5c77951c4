//! rara's fuzz harness: each target generates inputs with proptest strategies (structured
//! inputs, mostly valid and then mutated, and raw text or bytes) for a bounded time, checks
//! every input against the target's invariants, catches a panic per input, and on a failure
//! shrinks the input and reports it with the seed that reproduces it. Stable Rust, no
//! libFuzzer: it runs wherever `cargo test` does (`make fuzz`, `docs/src/development.md`).
//!
//! # Layout
//!
//! - [`runner`]: [`runner::Target`] (inputs and a check), [`runner::fuzz`] (the time-bounded
//!   loop, panics caught, failures shrunk) and [`runner::Report`] (inputs run, outcome
//!   classes, the failure).
//! - [`targets`]: one module per target (`workflow`, `message`, `retry`, `remote`) and
//!   [`targets::run`], which runs one by name.
//! - `main.rs`: the command line (`--seconds`, `--seed`, `--target`).

pub mod runner;
pub mod targets;
