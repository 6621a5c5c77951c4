//! Waiting for the loops to end: until every step's message is deleted, or a soak's
//! minutes are over (reading each minute as it ends).

use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use rara_testkit::scratch::ScratchDb;
use sqlx::PgPool;
use tokio::time::Instant;

use super::loops::Loops;
use crate::measure::{Before, Finished};
use crate::minutes::{MINUTE, READ_DELAY, Readings, SLICE};
use crate::options::Options;
use crate::system::pool;

fn progress_bar(length: Option<u64>) -> ProgressBar {
    let bar = match length {
        Some(length) => ProgressBar::new(length),
        None => ProgressBar::new_spinner(),
    };
    bar.set_style(
        ProgressStyle::with_template("{elapsed:>4} [{bar:40}] {pos}/{len} steps {per_sec} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}

/// Shows progress until every step's message is deleted.
pub(super) async fn wait(options: &Options, loops: &Loops, t0: Instant, target: u64) -> anyhow::Result<Finished> {
    let bar = progress_bar(Some(target));
    let elapsed = loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let done = loops.stats.steps_deleted.load(Ordering::Relaxed);
        bar.set_position(done);
        if done >= target && loops.submitted.load(Ordering::Relaxed) >= target {
            break t0.elapsed();
        } else if t0.elapsed() > options.timeout {
            bail!("the benchmark did not finish within {} s ({done}/{target} steps)", options.timeout.as_secs());
        }
        if loops.broken() {
            bail!("a scheduler or executor loop stopped early ({done}/{target} steps)");
        }
    };
    bar.finish_and_clear();
    Ok(Finished { elapsed, per_minute: Vec::new(), minutes: Readings::default() })
}

/// Soak: runs `minutes` minutes, counting the steps finished in each, reading each second's
/// claims [`READ_DELAY`] after it ends and each minute's history rows after its last second, on
/// a connection of its own (the loops go on meanwhile; the time measured ends with the last
/// minute).
pub(super) async fn soak(
    loops: &Loops,
    minutes: u32,
    before: &Before,
    scratch: &ScratchDb,
) -> anyhow::Result<Finished> {
    // Each read is small: no parallel workers for it (each a process started for a few ms).
    let options = scratch.connect_options().options([("max_parallel_workers_per_gather", "0")]);
    let check = pool(&options, 1).await.context("cannot connect to the scratch database")?;
    let finished = each_minute(loops, minutes, before, &check).await;
    check.close().await;
    finished
}

async fn each_minute(loops: &Loops, minutes: u32, before: &Before, check: &PgPool) -> anyhow::Result<Finished> {
    let bar = progress_bar(None);
    let (mut per_minute, mut readings) = (Vec::new(), Readings::default());
    let (mut counted, mut elapsed) = (0, Duration::ZERO);
    let per_minute_slices = (MINUTE.as_secs() / SLICE.as_secs()) as u32;
    // The last seconds of a minute are read after it ends (READ_DELAY later).
    let read_after_end = (READ_DELAY.as_secs() / SLICE.as_secs()) as u32;
    let reads = ReadSeconds { loops, bar: &bar, before, check };
    for minute in 1..=minutes {
        let end = before.t0 + MINUTE * minute;
        let (first, last) = ((minute - 1) * per_minute_slices + 1, minute * per_minute_slices);
        reads.run(&mut readings, first..=last - read_after_end).await?;
        let done = progress_until(loops, &bar, end).await?;
        elapsed = before.t0.elapsed();
        let n = done - counted;
        per_minute.push(n);
        counted = done;
        reads.run(&mut readings, last - read_after_end + 1..=last).await?;
        let pruned = loops.scheduler_counters(minute).await?.pruned;
        let (latency, history) = readings.end_minute(check, minute, pruned).await?;
        let ms = |v: Option<f64>| v.map_or("n/a".to_owned(), |v| format!("{v:.1}"));
        // Printed even when stderr is not a terminal (a hidden bar drops `println`).
        bar.suspend(|| {
            eprintln!(
                "minute {minute:>3}: {n} steps, {:.0} steps/s, due→claimed p50 {} p99 {} ms; rows: {} steps, {} attempts, {} runs, {} dead ({:.0} MiB); {} runs pruned",
                n as f64 / 60.0,
                ms(latency.p50),
                ms(latency.p99),
                history.steps_rows,
                history.attempts_rows,
                history.runs_rows,
                history.dead_rows,
                history.history_mb,
                history.runs_pruned,
            )
        });
    }
    bar.finish_and_clear();
    Ok(Finished { elapsed, per_minute, minutes: readings })
}

/// What reading a soak's seconds needs: each second is read [`READ_DELAY`] after it ends.
struct ReadSeconds<'a> {
    loops: &'a Loops,
    bar: &'a ProgressBar,
    before: &'a Before,
    check: &'a PgPool,
}

impl ReadSeconds<'_> {
    async fn run(&self, readings: &mut Readings, seconds: std::ops::RangeInclusive<u32>) -> anyhow::Result<()> {
        for second in seconds {
            progress_until(self.loops, self.bar, self.before.t0 + SLICE * second + READ_DELAY).await?;
            readings.read_second(self.check, self.before.t0_db, second).await?;
        }
        Ok(())
    }
}

/// Shows progress until `end`; returns the steps finished by then.
async fn progress_until(loops: &Loops, bar: &ProgressBar, end: Instant) -> anyhow::Result<u64> {
    loop {
        let done = loops.stats.steps_deleted.load(Ordering::Relaxed);
        bar.set_position(done);
        if loops.broken() {
            bail!("a scheduler or executor loop stopped early ({done} steps)");
        }
        let now = Instant::now();
        if now >= end {
            return Ok(done);
        }
        tokio::time::sleep_until(end.min(now + Duration::from_millis(50))).await;
    }
}
