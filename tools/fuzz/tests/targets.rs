//! Each target keeps its invariants over a few hundred seeded inputs (a short `make fuzz` in
//! `cargo test`), and the runner reports a failing input, shrunk, with its panic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use proptest::prelude::*;
use rara_fuzz::runner::{Budget, Target, fuzz};
use rara_fuzz::targets::{NAMES, run};

fn budget(inputs: u64) -> Budget {
    Budget { time: Duration::from_secs(60), max_inputs: Some(inputs) }
}

#[test]
fn every_target_keeps_its_invariants_over_seeded_inputs() {
    for name in NAMES {
        let report = run(name, 41, budget(300)).unwrap();
        assert!(report.failure.is_none(), "{report}");
        assert_eq!(report.inputs, 300, "{report}");
        assert!(report.classes.len() >= 3, "a target whose inputs all end alike proves little: {report}");
    }
}

#[test]
fn structured_inputs_are_accepted_as_well_as_refused() {
    for name in ["workflow", "message", "remote"] {
        let report = run(name, 7, budget(500)).unwrap();
        let accepted: u64 = report
            .classes
            .iter()
            .filter(|(class, _)| class.starts_with("accepted") || class.starts_with("completed"))
            .map(|(_, n)| n)
            .sum();
        assert!(accepted * 10 >= report.inputs, "fewer than one in ten inputs valid: {report}");
        assert!(accepted < report.inputs, "no input refused: {report}");
    }
}

/// A target with a planted bug: it panics on any number above 1000.
#[derive(Debug)]
struct Planted;

impl Target for Planted {
    type Input = u32;

    fn name(&self) -> &'static str {
        "planted"
    }

    fn inputs(&self) -> BoxedStrategy<u32> {
        any::<u32>().boxed()
    }

    fn check(&self, input: u32) -> Result<String, String> {
        assert!(input <= 1000, "planted bug");
        Ok("small".into())
    }
}

#[test]
fn a_panicking_input_fails_the_run_shrunk_to_the_smallest() {
    let report = fuzz(&Planted, 1, budget(10_000));
    let failure = report.failure.as_ref().expect("the planted bug is found");
    assert_eq!(failure.input, "1001", "{report}");
    assert!(failure.reason.contains("planted bug"), "{report}");
    assert!(report.to_string().contains("--seed 1"), "the report says how to reproduce it: {report}");
}

#[test]
fn one_seed_gives_the_same_run() {
    let a = run("message", 99, budget(200)).unwrap();
    let b = run("message", 99, budget(200)).unwrap();
    assert_eq!(a.classes, b.classes);
}
