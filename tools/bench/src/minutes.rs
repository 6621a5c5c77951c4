//! Soak: what is read at the end of each minute while the loops run, before the scheduler's
//! retention (`--prune-after`) can delete that minute's steps: due→claimed of the steps whose
//! first attempt started in the minute, and the rows the history tables hold (from the
//! statistics, `pg_stat_user_tables`: counting them would read every dead row version too,
//! a growing scan each minute while the loops run).
//!
//! Due→claimed is `step_attempts.started_at` of attempt 1 minus the step's `created_at` (soak
//! steps have no dependencies), counted per tenth of a millisecond; the minutes' counts added
//! up give the whole soak's percentiles, whatever was deleted since.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::report::{Latency, MinuteHistory, MinuteLatency};

/// The unit of a soak.
pub const MINUTE: Duration = Duration::from_secs(60);
/// How long after a minute ends it is read: the claims stamped in it have committed by then.
pub const READ_DELAY: Duration = Duration::from_secs(2);
/// The shortest `--prune-after`. A run finishes after its steps are claimed and is deleted no
/// sooner than `--prune-after` later, so the first claims of a minute stay until at least this
/// long after the minute started: the minute, [`READ_DELAY`], and 8 s for the reading itself.
pub const MIN_PRUNE_AFTER: Duration = Duration::from_secs(70);

/// Due→claimed, as steps per tenth of a millisecond.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Histogram(BTreeMap<i64, u64>);

impl Histogram {
    pub fn count(&self) -> u64 {
        self.0.values().sum()
    }

    /// Adds `other`'s steps to these.
    pub fn add(&mut self, other: &Histogram) {
        for (tenths, n) in &other.0 {
            *self.0.entry(*tenths).or_default() += n;
        }
    }

    /// The `q` quantile (nearest rank, as [`crate::report::percentiles`]), in ms; `None`
    /// when there are no steps.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let rank = ((q * self.count() as f64).ceil() as u64).max(1);
        let mut seen = 0;
        self.0.iter().find_map(|(tenths, n)| {
            seen += n;
            (seen >= rank).then_some(*tenths as f64 / 10.0)
        })
    }

    /// p50, p95, p99 and max (NaN when there are no steps).
    pub fn latency(&self) -> Latency {
        let at = |q| self.quantile(q).unwrap_or(f64::NAN);
        Latency { p50: at(0.5), p95: at(0.95), p99: at(0.99), max: at(1.0) }
    }
}

/// What the minutes of a soak read, in order.
#[derive(Debug, Default)]
pub struct Readings {
    pub latency: Vec<MinuteLatency>,
    pub history: Vec<MinuteHistory>,
    /// Every minute's due→claimed together: the whole soak's.
    pub whole: Histogram,
}

impl Readings {
    /// Reads minute `minute` (1 = the first after `t0_db`, when the loops started) on
    /// `check`, keeps it and returns it; `pruned` is how many runs the scheduler has deleted
    /// so far.
    pub async fn read(
        &mut self,
        check: &PgPool,
        t0_db: DateTime<Utc>,
        minute: u32,
        pruned: u64,
    ) -> Result<(MinuteLatency, MinuteHistory), sqlx::Error> {
        let claimed = claimed_in(check, t0_db, minute).await?;
        let (steps_rows, attempts_rows, runs_rows, dead_rows, bytes): (i64, i64, i64, i64, i64) = sqlx::query_as(
            "SELECT coalesce(sum(n_live_tup) FILTER (WHERE relname = 'steps'), 0)::bigint,
                    coalesce(sum(n_live_tup) FILTER (WHERE relname = 'step_attempts'), 0)::bigint,
                    coalesce(sum(n_live_tup) FILTER (WHERE relname = 'workflow_runs'), 0)::bigint,
                    coalesce(sum(n_dead_tup) FILTER (WHERE relname <> 'workflow_runs'), 0)::bigint,
                    pg_total_relation_size('steps') + pg_total_relation_size('step_attempts')
             FROM pg_stat_user_tables WHERE relname IN ('steps', 'step_attempts', 'workflow_runs')",
        )
        .fetch_one(check)
        .await?;
        self.whole.add(&claimed);
        let latency = MinuteLatency {
            minute: minute as i32,
            claimed: claimed.count() as i64,
            p50: claimed.quantile(0.5),
            p99: claimed.quantile(0.99),
        };
        let history = MinuteHistory {
            minute,
            steps_rows,
            attempts_rows,
            runs_rows,
            dead_rows,
            history_mb: bytes as f64 / (1024.0 * 1024.0),
            runs_pruned: pruned,
            load_average_1m: crate::system::load_average(),
        };
        self.latency.push(latency.clone());
        self.history.push(history.clone());
        Ok((latency, history))
    }
}

/// Due→claimed of the steps whose first attempt started in minute `minute` after `t0_db`.
async fn claimed_in(check: &PgPool, t0_db: DateTime<Utc>, minute: u32) -> Result<Histogram, sqlx::Error> {
    let counts: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT round(extract(epoch FROM a.started_at - greatest(s.created_at, $1)) * 10000)::bigint, count(*)
         FROM steps s JOIN step_attempts a ON a.step_id = s.id AND a.attempt = 1
         WHERE a.started_at >= $1 + ($2 - 1) * interval '1 minute' AND a.started_at < $1 + $2 * interval '1 minute'
         GROUP BY 1",
    )
    .bind(t0_db)
    .bind(minute as i32)
    .fetch_all(check)
    .await?;
    Ok(Histogram(counts.into_iter().map(|(tenths, n)| (tenths, n as u64)).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(ms: &[f64]) -> Histogram {
        let mut h = Histogram::default();
        for v in ms {
            *h.0.entry((v * 10.0).round() as i64).or_default() += 1;
        }
        h
    }

    #[test]
    fn quantiles_are_the_nearest_rank_of_the_steps_counted() {
        let values: Vec<f64> = (1..=200).map(|i| i as f64 / 2.0).collect();
        let latency = histogram(&values).latency();
        let expected = crate::report::percentiles(values);
        assert_eq!(
            (latency.p50, latency.p95, latency.p99, latency.max),
            (expected.p50, expected.p95, expected.p99, expected.max)
        );
    }

    #[test]
    fn minutes_added_up_give_the_whole_soaks_quantiles() {
        let (first, second) = (histogram(&[1.0; 99]), histogram(&[40.0, 40.0, 40.0, 7.5]));
        let mut whole = Histogram::default();
        whole.add(&first);
        whole.add(&second);
        assert_eq!(whole.count(), 103);
        assert_eq!(whole.quantile(0.5), Some(1.0));
        assert_eq!(whole.quantile(0.99), Some(40.0), "the 102nd of 103 steps");
        assert_eq!(whole.quantile(1.0), Some(40.0));
        assert_eq!(Histogram::default().quantile(0.5), None);
    }
}
