//! Recording the verdicts on finished executions ([`crate::executor::fate::judge`]): one
//! statement per kind of outcome for everything that finished together, then each record's fate.

use std::time::Duration;

use chrono::{DateTime, Utc};
use rara_domain::StepError;
use rara_domain::step_error::codes;
use rara_store::Holder;
use rara_store::children::ChildStart;
use rara_store::detach::Park;
use rara_store::map::Expansion;
use rara_store::outcome::RetryVia;

use super::BatchExecutor;
use crate::executor::fate::{Ack, BatchReport, Record, Verdict};

/// A finished execution, with what recording it must do.
pub(super) struct Finished {
    pub(super) record: Record,
    pub(super) holder: Holder,
    /// When the holder attached (the start of the stretch a park records).
    pub(super) attached_at: DateTime<Utc>,
    pub(super) verdict: Verdict,
}

/// Finished executions sorted by what recording them writes: one statement per kind.
#[derive(Default)]
struct Sorted {
    successes: Vec<(Record, (Holder, serde_json::Value))>,
    failures: Vec<(Record, (Holder, StepError))>,
    via_postgres: Vec<(Record, (Holder, StepError, Duration))>,
    via_message: Vec<(Record, (Holder, StepError, Duration))>,
    released: Vec<(Record, Holder)>,
    parks: Vec<(Record, Park)>,
    expansions: Vec<(Record, Expansion)>,
    children: Vec<(Record, Box<ChildStart>)>,
}

impl Sorted {
    /// Sorts `finished` by verdict; a lost lease is acknowledged here (nothing to write).
    fn of(finished: Vec<Finished>, report: &mut BatchReport) -> Self {
        let mut sorted = Sorted::default();
        for Finished { record, holder, attached_at, verdict } in finished {
            match verdict {
                Verdict::Succeed(output) => sorted.successes.push((record, (holder, output))),
                Verdict::Fail(error) => {
                    tracing::warn!(step_id = %holder.step_id, code = %error.code, retryable = error.retryable, "step failed for good");
                    sorted.failures.push((record, (holder, error)));
                }
                Verdict::RetryByPostgres { error, delay } => sorted.via_postgres.push((record, (holder, error, delay))),
                Verdict::RetryByMessage { error, delay } => sorted.via_message.push((record, (holder, error, delay))),
                Verdict::Release => sorted.released.push((record, holder)),
                Verdict::Park(resume) => sorted.parks.push((record, Park { holder, resume, attached_at })),
                Verdict::Expand(expansion) => sorted.expansions.push((record, expansion)),
                Verdict::StartChild(start) => sorted.children.push((record, start)),
                Verdict::Nothing => {
                    report.counters.lease_lost += 1;
                    tracing::info!(step_id = %holder.step_id, "lease lost; nothing recorded");
                    report.acknowledge(record.message_id, Ack::LeaseLost);
                }
            }
        }
        sorted
    }
}

impl BatchExecutor {
    /// Records everything that finished together: the outcomes that settle a step
    /// ([`record_ends`](Self::record_ends)), then those whose message comes back
    /// ([`record_comebacks`](Self::record_comebacks)).
    pub(super) async fn record(&self, finished: Vec<Finished>, report: &mut BatchReport) {
        let sorted = Sorted::of(finished, report);
        let comebacks = self.record_ends(sorted, report).await;
        self.record_comebacks(comebacks, report).await;
    }

    /// Successes, expansions, failures for good and retries in Postgres: each acknowledged once
    /// recorded. Returns the rest.
    async fn record_ends(&self, sorted: Sorted, report: &mut BatchReport) -> Sorted {
        let Sorted { successes, failures, via_postgres, via_message, released, parks, expansions, children } = sorted;
        let rest = Sorted { via_message, released, parks, ..Sorted::default() };
        if !successes.is_empty() {
            let (records, items) = unzip(successes);
            let results = self.db(self.env.store.succeed(&items)).await;
            for (record, _) in self.settle(records, items, results, report) {
                report.counters.succeeded += 1;
                report.acknowledge(record.message_id, Ack::Succeeded);
            }
        }
        if !expansions.is_empty() {
            let (records, items) = unzip(expansions);
            let results = self.db(self.env.store.expand(&items)).await;
            for (record, expansion) in self.settle(records, items, results, report) {
                report.counters.expanded += 1;
                tracing::info!(step_id = %expansion.holder.step_id, children = expansion.children.len(), "map step expanded");
                report.acknowledge(record.message_id, Ack::Expanded);
            }
        }
        if !children.is_empty() {
            let (records, items) = unzip(children);
            let results = Ok(self.start_children(&items).await);
            for (record, start) in self.settle(records, items, results, report) {
                report.counters.children_started += 1;
                tracing::info!(step_id = %start.holder.step_id, workflow = %start.plan.name, "child run made; the step waits for it");
                report.acknowledge(record.message_id, Ack::Waiting);
            }
        }
        if !failures.is_empty() {
            let (records, items) = unzip(failures);
            let results = self.db(self.env.store.fail(&items)).await;
            for (record, _) in self.settle(records, items, results, report) {
                report.counters.failed += 1;
                report.acknowledge(record.message_id, Ack::Failed);
            }
        }
        if !via_postgres.is_empty() {
            let (records, items) = unzip(via_postgres);
            let results = self.db(self.env.store.retry(&items, RetryVia::Postgres)).await;
            for (record, _) in self.settle(records, items, results, report) {
                report.counters.retried += 1;
                report.counters.deferred += 1;
                report.acknowledge(record.message_id, Ack::RetryInPostgres);
            }
        }
        rest
    }

    /// Steps given back, parked attempts and retries by message: their messages come back (a
    /// step given back is acknowledged: its token is cleared).
    async fn record_comebacks(&self, sorted: Sorted, report: &mut BatchReport) {
        let Sorted { released, parks, via_message, .. } = sorted;
        if !released.is_empty() {
            let (records, holders) = unzip(released);
            let error = StepError::retryable(
                codes::EXECUTOR_SHUTDOWN,
                "the runner stopped before the step finished; the step was given back",
            );
            let results = self.db(self.env.store.release_running(&holders, &error)).await;
            for (record, holder) in self.settle(records, holders, results, report) {
                report.counters.released += 1;
                tracing::info!(step_id = %holder.step_id, "step given back; another executor runs it");
                report.acknowledge(record.message_id, Ack::Released);
            }
        }
        if !parks.is_empty() {
            let (records, items) = unzip(parks);
            let interval = self.reattach_interval;
            let results = self.db(self.env.store.park(&items, interval, self.delivery_timeout)).await;
            for (record, park) in self.settle(records, items, results, report) {
                report.counters.parked += 1;
                tracing::info!(
                    step_id = %park.holder.step_id, endpoint = %park.resume.endpoint, sequence = park.resume.sequence,
                    reattach_in_ms = interval.as_millis() as u64, "attempt parked; it runs on detached"
                );
                self.come_back(&record, interval, report).await;
            }
        }
        if !via_message.is_empty() {
            let (records, items) = unzip(via_message);
            // The same message comes back after the delay: its lease lasts the delay plus the
            // delivery timeout, like a fresh one.
            let results =
                self.db(self.env.store.retry(&items, RetryVia::Message { lease: self.delivery_timeout })).await;
            for (record, (holder, error, delay)) in self.settle(records, items, results, report) {
                report.counters.retried += 1;
                tracing::info!(step_id = %holder.step_id, code = %error.code, delay_ms = delay.as_millis() as u64, "retry scheduled; the message comes back after the delay");
                self.come_back(&record, delay, report).await;
            }
        }
    }

    /// The records (with their items) whose outcome landed. A lost lease is acknowledged
    /// (someone else owns the step now); any other failure to record leaves the record to
    /// come back, and the claim decides again when it does.
    fn settle<T>(
        &self,
        records: Vec<Record>,
        items: Vec<T>,
        results: Result<Vec<Result<(), rara_store::Error>>, rara_store::Error>,
        report: &mut BatchReport,
    ) -> Vec<(Record, T)> {
        let results = match results {
            Ok(results) => results,
            Err(e) => {
                tracing::error!(error = %e, "recording outcomes failed; their messages come back");
                return Vec::new();
            }
        };
        let mut landed = Vec::with_capacity(records.len());
        for ((record, item), result) in records.into_iter().zip(items).zip(results) {
            match result {
                Ok(()) => landed.push((record, item)),
                Err(rara_store::Error::LeaseLost { step_id, .. }) => {
                    report.counters.lease_lost += 1;
                    tracing::info!(%step_id, "lease lost before the outcome was recorded; nothing written");
                    report.acknowledge(record.message_id, Ack::LeaseLost);
                }
                Err(e) => tracing::error!(error = %e, "an outcome could not be recorded; the message comes back"),
            }
        }
        landed
    }
}

/// Splits `(record, item)` pairs into the records and the store's items.
fn unzip<T>(pairs: Vec<(Record, T)>) -> (Vec<Record>, Vec<T>) {
    pairs.into_iter().unzip()
}
