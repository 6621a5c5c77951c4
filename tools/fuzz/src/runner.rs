//! The time-bounded loop: inputs drawn from a target's strategy in chunks, each chunk from an
//! RNG seeded by (seed, chunk number), so one seed gives the same inputs in the same order on
//! every machine. proptest's runner catches each input's panic and shrinks a failing input.

use std::backtrace::Backtrace;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use proptest::strategy::BoxedStrategy;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

/// Inputs per chunk: the time bound is checked between chunks.
const CHUNK: u32 = 256;
/// The longest a failure is shrunk.
const MAX_SHRINK_MILLIS: u32 = 30_000;
/// The outcome classes a report prints (the most frequent first).
const SHOWN_CLASSES: usize = 12;

/// What is fuzzed: a strategy of inputs and the invariants every input must keep.
pub trait Target {
    type Input: std::fmt::Debug + Clone + 'static;
    /// The target's name on the command line.
    fn name(&self) -> &'static str;
    /// The inputs: structured ones, mostly valid and then mutated, and raw ones.
    fn inputs(&self) -> BoxedStrategy<Self::Input>;
    /// Checks one input: `Ok` with its outcome class (`accepted`, `refused: steps[].name`), or
    /// `Err` with the invariant it broke. A panic is a failure too.
    fn check(&self, input: Self::Input) -> Result<String, String>;
}

/// How long a target runs: until `time` has passed or, if set, `max_inputs` were checked.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub time: Duration,
    pub max_inputs: Option<u64>,
}

/// What one target's run did.
#[derive(Debug)]
pub struct Report {
    pub target: &'static str,
    pub seed: u64,
    /// Inputs checked (those tried while shrinking a failure included).
    pub inputs: u64,
    pub elapsed: Duration,
    /// Inputs per outcome class.
    pub classes: BTreeMap<String, u64>,
    pub failure: Option<Failure>,
}

/// A broken invariant or a panic, with the smallest input found that does it.
#[derive(Debug)]
pub struct Failure {
    pub reason: String,
    /// Where the last panic happened, if the failure was one.
    pub panic_location: Option<String>,
    /// The shrunk input (`{:#?}`).
    pub input: String,
}

/// Runs `target` within `budget` on the inputs of `seed`.
pub fn fuzz<T: Target>(target: &T, seed: u64, budget: Budget) -> Report {
    let started = Instant::now();
    let strategy = target.inputs();
    let inputs = Cell::new(0u64);
    let classes = RefCell::new(BTreeMap::<String, u64>::new());
    let mut failure = None;
    let left = |inputs: u64| budget.max_inputs.map_or(u64::from(CHUNK), |max| max.saturating_sub(inputs));
    let mut chunk = 0u64;
    while failure.is_none() && started.elapsed() < budget.time && left(inputs.get()) > 0 {
        let cases = left(inputs.get()).min(u64::from(CHUNK)) as u32;
        let config =
            Config { cases, failure_persistence: None, max_shrink_time: MAX_SHRINK_MILLIS, ..Config::default() };
        let mut runner = TestRunner::new_with_rng(config, chunk_rng(seed, chunk));
        let result = runner.run(&strategy, |input| {
            inputs.set(inputs.get() + 1);
            let class = target.check(input).map_err(TestCaseError::fail)?;
            *classes.borrow_mut().entry(class).or_default() += 1;
            Ok(())
        });
        failure = match result {
            Ok(()) => None,
            Err(TestError::Fail(reason, input)) => {
                Some(Failure { reason: reason.to_string(), panic_location: last_panic(), input: format!("{input:#?}") })
            }
            Err(TestError::Abort(reason)) => {
                Some(Failure { reason: reason.to_string(), panic_location: None, input: String::new() })
            }
        };
        chunk += 1;
    }
    Report {
        target: target.name(),
        seed,
        inputs: inputs.get(),
        elapsed: started.elapsed(),
        classes: classes.into_inner(),
        failure,
    }
}

/// The RNG of chunk `chunk` of a run seeded by `seed`.
fn chunk_rng(seed: u64, chunk: u64) -> TestRng {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&chunk.to_le_bytes());
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

thread_local! {
    /// Where this thread's last panic happened and its stack (recorded by [`quiet_panics`]).
    static LAST_PANIC: RefCell<Option<(String, Backtrace)>> = const { RefCell::new(None) };
}

/// Replaces the panic hook by one that records where a panic happened instead of printing
/// it: a failing input panics again on every shrinking step.
pub fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        let location =
            info.location().map_or_else(String::new, |l| format!("{}:{}:{}", l.file(), l.line(), l.column()));
        LAST_PANIC.with(|last| *last.borrow_mut() = Some((location, Backtrace::force_capture())));
    }));
}

/// The last panic's location, then the frames of rara's crates in its stack.
fn last_panic() -> Option<String> {
    let (location, stack) = LAST_PANIC.with(|last| last.borrow_mut().take())?;
    let stack = stack.to_string();
    let mut lines = stack.lines().peekable();
    let mut frames = vec![location];
    while let Some(line) = lines.next() {
        if line.contains("rara_") && !line.contains("rara_fuzz::runner") {
            frames.push(line.trim().to_owned());
            if let Some(at) = lines.next_if(|next| next.trim_start().starts_with("at ")) {
                frames.push(format!("    {}", at.trim()));
            }
        }
    }
    Some(frames.join("\n    "))
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verdict = if self.failure.is_some() { "FAILED" } else { "ok" };
        writeln!(
            f,
            "{}: {verdict}: {} inputs in {:.1} s (seed {}), {} outcome classes",
            self.target,
            self.inputs,
            self.elapsed.as_secs_f64(),
            self.seed,
            self.classes.len()
        )?;
        let mut classes: Vec<(&String, &u64)> = self.classes.iter().collect();
        classes.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (class, count) in classes.iter().take(SHOWN_CLASSES) {
            writeln!(f, "  {:>6.2}%  {class}", **count as f64 * 100.0 / self.inputs.max(1) as f64)?;
        }
        if classes.len() > SHOWN_CLASSES {
            writeln!(f, "  … and {} more classes", classes.len() - SHOWN_CLASSES)?;
        }
        if let Some(failure) = &self.failure {
            writeln!(f, "  failure: {}", failure.reason)?;
            if let Some(location) = &failure.panic_location {
                writeln!(f, "  panicked at: {location}")?;
            }
            writeln!(f, "  shrunk input:\n{}", failure.input)?;
            writeln!(
                f,
                "  reproduce: cargo run --profile fuzz -p rara-fuzz -- --target {} --seed {} --seconds {}",
                self.target,
                self.seed,
                self.elapsed.as_secs() + 1
            )?;
        }
        Ok(())
    }
}
