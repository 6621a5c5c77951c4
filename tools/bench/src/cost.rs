//! The AWS cost estimate of a run: Lambda compute and requests, SQS requests, per million
//! noop steps, from the requests [`Counted`](crate::counted::Counted) counted.

use std::sync::atomic::Ordering;

use serde::Serialize;

use crate::counted::QueueStats;

/// AWS list prices used by the cost estimate: us-east-1, as published on
/// aws.amazon.com/lambda/pricing and aws.amazon.com/sqs/pricing (read 2025-06; not fetched
/// live, check before quoting). Lambda arm64, first 7.5 billion GB-s a month.
const LAMBDA_ARM64_USD_PER_GB_SECOND: f64 = 0.000_013_333_4;
const LAMBDA_USD_PER_REQUEST: f64 = 0.20 / 1e6;
/// SQS standard queue, after the first million requests a month (a request is ≤ 64 KiB).
const SQS_USD_PER_REQUEST: f64 = 0.40 / 1e6;
/// The template's defaults (infra/template.yaml): ExecutorMemorySize, SchedulerMemorySize.
const EXECUTOR_MEMORY_GB: f64 = 512.0 / 1024.0;
const SCHEDULER_MEMORY_GB: f64 = 256.0 / 1024.0;
/// The scheduler runs every minute for its budget (RARA_SCHEDULER_BUDGET_SECONDS = 50).
const SCHEDULER_SECONDS_PER_MONTH: f64 = 50.0 * 60.0 * 24.0 * 30.0;

/// Estimated AWS cost per million noop steps (see the price constants and their date).
#[derive(Debug, Serialize, Default)]
pub struct AwsEstimate {
    pub price_date: &'static str,
    pub mean_batch_ms: f64,
    pub executor_invocations: f64,
    pub executor_gb_s: f64,
    pub lambda_compute_usd: f64,
    pub lambda_requests_usd: f64,
    pub sqs_requests_usd: f64,
    pub total_usd_per_million_steps: f64,
    /// Not per step: the scheduler runs every minute whether or not anything is due.
    pub scheduler_usd_per_month: f64,
}

pub fn estimate(stats: &QueueStats, steps: u64) -> AwsEstimate {
    let batches = stats.batches.load(Ordering::Relaxed).max(1) as f64;
    let mean_batch_ms = stats.batch_nanos.load(Ordering::Relaxed) as f64 / batches / 1e6;
    let per_step = |a| QueueStats::per_step(a, steps);
    let million = 1e6;
    // Lambda's event source makes one invocation per non-empty batch; billed per 1 ms.
    let invocations = million * batches / steps.max(1) as f64;
    let gb_s = invocations * mean_batch_ms.ceil() / 1000.0 * EXECUTOR_MEMORY_GB;
    let lambda_compute_usd = gb_s * LAMBDA_ARM64_USD_PER_GB_SECOND;
    let lambda_requests_usd = invocations * LAMBDA_USD_PER_REQUEST;
    // Send batches (scheduler) + non-empty receives + delete batches (event source) +
    // visibility changes. Empty polls of the event source are billed too but depend on
    // traffic, not on steps: left out.
    let sqs_requests = million
        * (per_step(&stats.send_requests)
            + per_step(&stats.receive_requests)
            + per_step(&stats.delete_requests)
            + per_step(&stats.change_visibility)
            - per_step(&stats.empty_receives));
    let sqs_requests_usd = sqs_requests * SQS_USD_PER_REQUEST;
    AwsEstimate {
        price_date: "2025-06 (us-east-1 list prices, not fetched live)",
        mean_batch_ms,
        executor_invocations: invocations,
        executor_gb_s: gb_s,
        lambda_compute_usd,
        lambda_requests_usd,
        sqs_requests_usd,
        total_usd_per_million_steps: lambda_compute_usd + lambda_requests_usd + sqs_requests_usd,
        scheduler_usd_per_month: SCHEDULER_SECONDS_PER_MONTH * SCHEDULER_MEMORY_GB * LAMBDA_ARM64_USD_PER_GB_SECOND,
    }
}
