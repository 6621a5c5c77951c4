//! Soak: what is read while the loops run, before the scheduler's retention (`--prune-after`)
//! can delete it: due→claimed of the steps whose first attempt started in each second, read
//! [`READ_DELAY`] after the second ends and added up by the minute, and at the end of each
//! minute the rows the history tables hold (from the statistics, `pg_stat_user_tables`:
//! counting them would read every dead row version too, a growing scan each minute while the
//! loops run).
//!
//! Second by second, not a minute at once: a minute's 180,000 claims read in one query took a
//! core for a few hundred milliseconds while the loops ran, and the ten lease rounds behind it
//! were the soak's slowest (0.8 % of its steps, most of its p99;
//! `docs/benchmarks/journal/2026-12-07-soak-evidence.md`). A second's read is a sixtieth of it,
//! every second alike.
//!
//! Due→claimed is `step_attempts.started_at` of attempt 1 minus the step's `created_at` (soak
//! steps have no dependencies), counted per tenth of a millisecond; the seconds' counts added
//! up give each minute's and the whole soak's percentiles, whatever was deleted since.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::report::{Latency, MinuteHistory, MinuteLatency};

/// The unit of a soak.
pub const MINUTE: Duration = Duration::from_secs(60);
/// The span of time whose claims are read at once.
pub const SLICE: Duration = Duration::from_secs(1);
/// How long after a second (a minute) ends it is read: the claims stamped in it have committed
/// by then.
pub const READ_DELAY: Duration = Duration::from_secs(2);
/// The shortest `--prune-after`. A run finishes after its steps are claimed and is deleted no
/// sooner than `--prune-after` later; a second's claims are read [`READ_DELAY`] after it ends,
/// and a minute's history rows just after its last second: this keeps more than a minute of
/// margin over both (the minute, [`READ_DELAY`], and 8 s for a late read).
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
    /// Due→claimed of the seconds read so far of the minute under way.
    current: Histogram,
}

impl Readings {
    /// Reads second `second` (1 = the first after `t0_db`, when the loops started) on `check`
    /// into the minute under way.
    pub async fn read_second(&mut self, check: &PgPool, t0_db: DateTime<Utc>, second: u32) -> Result<(), sqlx::Error> {
        // The attempts are found by their start in `step_attempts_started_at` (BRIN), whose
        // new page ranges autovacuum summarizes (`autosummarize`); without it (the machine's
        // server) every range not yet summarized is read whole, and a second's read scanned
        // the table: summarizing what is new (the pages of about a second) comes first.
        sqlx::query("SELECT brin_summarize_new_values('step_attempts_started_at')").execute(check).await?;
        let from = t0_db + SLICE * (second - 1);
        self.current.add(&claimed_between(check, t0_db, from, from + SLICE).await?);
        Ok(())
    }

    /// Ends minute `minute` (its seconds read by [`read_second`](Self::read_second)): reads
    /// the history tables' rows on `check`, keeps the minute and returns it; `pruned` is how
    /// many runs the scheduler has deleted so far.
    pub async fn end_minute(
        &mut self,
        check: &PgPool,
        minute: u32,
        pruned: u64,
    ) -> Result<(MinuteLatency, MinuteHistory), sqlx::Error> {
        let claimed = std::mem::take(&mut self.current);
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

/// Due→claimed of the steps whose first attempt started from `from` (inclusive) to `to`
/// (none is due before `t0_db`, when the loops started).
async fn claimed_between(
    check: &PgPool,
    t0_db: DateTime<Utc>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Histogram, sqlx::Error> {
    let counts: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT round(extract(epoch FROM a.started_at - greatest(s.created_at, $1)) * 10000)::bigint, count(*)
         FROM steps s JOIN step_attempts a ON a.step_id = s.id AND a.attempt = 1
         WHERE a.started_at >= $2 AND a.started_at < $3
         GROUP BY 1",
    )
    .bind(t0_db)
    .bind(from)
    .bind(to)
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

/// The reads against a real Postgres (`DATABASE_URL`): each second's claims land in the minute
/// under way, and a minute ends with exactly its seconds' steps.
#[cfg(test)]
mod reads {
    use rara_testkit::scratch::ScratchDb;

    use super::*;
    use crate::options::Operation;

    #[tokio::test]
    async fn each_second_is_read_into_its_minute() {
        let scratch = ScratchDb::on_server_of_env("rara_bench_minutes").unwrap();
        scratch.create_migrated().await.unwrap();
        let settings = crate::throughput::settings("bench", "memory://rara-bench", None, &[]).unwrap();
        crate::throughput::submit(&scratch, &settings, &crate::workload::flat(4, Operation::Noop)).await.unwrap();
        let check = crate::system::pool(&scratch.connect_options(), 1).await.unwrap();
        let t0: DateTime<Utc> = sqlx::query_scalar("SELECT date_trunc('second', now()) - interval '1 hour'")
            .fetch_one(&check)
            .await
            .unwrap();
        // Four steps due at t0 + 0.5 s; claimed 3, 5 and 7 ms later in second 1, and 20 ms
        // later in second 2 (one due at t0 + 1.5 s).
        let ids: Vec<uuid::Uuid> =
            sqlx::query_scalar("SELECT id FROM steps ORDER BY id").fetch_all(&check).await.unwrap();
        let ms = Duration::from_millis;
        let timings = [(t0 + ms(500), 3), (t0 + ms(500), 5), (t0 + ms(500), 7), (t0 + ms(1500), 20)];
        for (id, (due, after_ms)) in ids.iter().zip(timings) {
            sqlx::query("UPDATE steps SET created_at = $2 WHERE id = $1")
                .bind(id)
                .bind(due)
                .execute(&check)
                .await
                .unwrap();
            sqlx::query(
                "INSERT INTO step_attempts (step_id, attempt, fence, leased_by, lease_token, started_at)
                 VALUES ($1, 1, 1, 'test', gen_random_uuid(), $2)",
            )
            .bind(id)
            .bind(due + ms(after_ms))
            .execute(&check)
            .await
            .unwrap();
        }
        let mut readings = Readings::default();
        readings.read_second(&check, t0, 1).await.unwrap();
        assert_eq!(readings.current.count(), 3, "second 1 holds the three claims started in it");
        readings.read_second(&check, t0, 2).await.unwrap();
        readings.read_second(&check, t0, 3).await.unwrap();
        let (latency, _) = readings.end_minute(&check, 1, 0).await.unwrap();
        assert_eq!(latency.claimed, 4);
        assert_eq!((latency.p50, latency.p99), (Some(5.0), Some(20.0)));
        assert_eq!(readings.current.count(), 0, "the next minute starts empty");
        assert_eq!(readings.whole.count(), 4);
        check.close().await;
        scratch.drop_database().await.unwrap();
    }
}
