//! `rara-fuzz`: runs the fuzz targets for a bounded time each and prints, per target, the
//! inputs run and their outcome classes; exits non-zero when an input broke a target's
//! invariants (the shrunk input and the seed that reproduces it are printed).

use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Parser;
use rara_fuzz::runner::{Budget, Report, quiet_panics};
use rara_fuzz::targets::{NAMES, run};

#[derive(Debug, Parser)]
#[command(about = "Fuzz rara's parsers of hostile input for a bounded time (see docs/src/development.md)")]
struct Args {
    /// Seconds per target.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// The seed of the inputs (default: from the clock; printed, so a failure reproduces).
    #[arg(long)]
    seed: Option<u64>,
    /// A target to run (repeat for several; default: all of workflow, message, retry, remote).
    #[arg(long = "target", value_parser = clap::builder::PossibleValuesParser::new(NAMES))]
    targets: Vec<String>,
    /// Stop a target after this many inputs, even with time left.
    #[arg(long)]
    max_inputs: Option<u64>,
    /// Targets run at once, one per thread.
    #[arg(long, default_value_t = 1)]
    jobs: usize,
}

fn main() -> anyhow::Result<ExitCode> {
    let args = Args::parse();
    let seed =
        args.seed.unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64));
    let targets = if args.targets.is_empty() { NAMES.map(str::to_owned).to_vec() } else { args.targets };
    let budget = Budget { time: Duration::from_secs(args.seconds), max_inputs: args.max_inputs };
    println!("rara-fuzz: seed {seed}, {} s per target", args.seconds);
    quiet_panics();
    let next = AtomicUsize::new(0);
    let reports: Mutex<Vec<Option<anyhow::Result<Report>>>> = Mutex::new(targets.iter().map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..args.jobs.clamp(1, targets.len()) {
            scope.spawn(|| {
                while let Some(target) = targets.get(next.fetch_add(1, Ordering::SeqCst)) {
                    let report = run(target, seed, budget);
                    if let Ok(mut reports) = reports.lock()
                        && let Some(slot) = targets.iter().position(|t| t == target).and_then(|i| reports.get_mut(i))
                    {
                        *slot = Some(report);
                    }
                }
            });
        }
    });
    let mut failed = false;
    for report in reports.into_inner().map_err(|_| anyhow::anyhow!("a target's thread panicked"))? {
        let report = report.ok_or_else(|| anyhow::anyhow!("a target did not report"))??;
        print!("{report}");
        failed |= report.failure.is_some();
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
