// Graphile Worker, side by side with rara-bench: `scripts/graphile-bench.sh` runs this twice on
// a scratch database (DATABASE_URL), see BENCHMARKS.md.
//
//   node bench.cjs prepare JOBS   Graphile Worker's migrations, then JOBS noop jobs in one
//                                 addJobs call (before the clock, like rara-bench's submission)
//   node bench.cjs run JOBS       a worker (run()) with the settings below, timed from start
//                                 until no job is left (completed jobs are deleted); prints
//                                 one JSON line
//   node bench.cjs soak MINUTES RATE  the same worker for MINUTES minutes while one addJobs call
//                                 of RATE/20 noop jobs is made every 50 ms (rara-bench soak's
//                                 submitter); prints one JSON line with each minute's add →
//                                 start: from the job's run_at (the adding transaction's now(),
//                                 as a rara step is due at its run's created_at) to the task's
//                                 start, in whole milliseconds (both clocks are the host's)
//
// Environment: DATABASE_URL; GRAPHILE_CONCURRENCY (24), GRAPHILE_LOCAL_QUEUE (200),
// GRAPHILE_COMPLETE_BATCH_DELAY (0), GRAPHILE_MAX_POOL (10, Graphile's default).
"use strict";

const { run, runMigrations, makeWorkerUtils } = require("graphile-worker");
const path = require("node:path");
const { version } = require(path.join(path.dirname(require.resolve("graphile-worker")), "..", "package.json"));
const { Client } = require("pg");

const connectionString = process.env.DATABASE_URL;
const int = (name, fallback) => Number.parseInt(process.env[name] ?? `${fallback}`, 10);
const settings = {
  concurrency: int("GRAPHILE_CONCURRENCY", 24),
  maxPoolSize: int("GRAPHILE_MAX_POOL", 10),
  localQueueSize: int("GRAPHILE_LOCAL_QUEUE", 200),
  completeJobBatchDelay: int("GRAPHILE_COMPLETE_BATCH_DELAY", 0),
  failJobBatchDelay: int("GRAPHILE_COMPLETE_BATCH_DELAY", 0),
};
// Only Graphile's warnings and errors, on stderr (stdout is the JSON line).
const { Logger } = require("@graphile/logger");
const logger = new Logger(() => (level, message) => {
  if (level === "error" || level === "warning") console.error(`graphile ${level}: ${message}`);
});

async function prepare(jobs) {
  await runMigrations({ connectionString, logger });
  const utils = await makeWorkerUtils({ connectionString, logger });
  try {
    for (let added = 0; added < jobs; added += 1000) {
      const n = Math.min(1000, jobs - added);
      await utils.addJobs(Array.from({ length: n }, () => ({ identifier: "noop", payload: {} })));
    }
  } finally {
    await utils.release();
  }
}

/** The worker of `run` and `soak`, with `noop` as its one task. */
function worker(noop) {
  return run({
    connectionString,
    concurrency: settings.concurrency,
    maxPoolSize: settings.maxPoolSize,
    noHandleSignals: true,
    logger,
    taskList: { noop },
    preset: {
      worker: {
        localQueue: { size: settings.localQueueSize },
        completeJobBatchDelay: settings.completeJobBatchDelay,
        failJobBatchDelay: settings.failJobBatchDelay,
      },
    },
  });
}

/** Prints the run's one JSON line: who ran, and `fields`. */
function print(fields) {
  console.log(JSON.stringify({ system: "graphile-worker", version, node: process.version, ...fields }));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function remaining(client) {
  const { rows } = await client.query("SELECT count(*)::int AS n FROM graphile_worker._private_jobs");
  return rows[0].n;
}

async function timed(jobs) {
  const check = new Client({ connectionString });
  await check.connect();
  let succeeded = 0;
  let allDone;
  const done = new Promise((resolve) => (allDone = resolve));
  const t0 = process.hrtime.bigint();
  const runner = await worker(async () => {});
  runner.events.on("job:success", () => {
    succeeded += 1;
    if (succeeded === jobs) allDone();
  });
  await done;
  // The completions are batched: the clock stops when the last one is committed.
  while ((await remaining(check)) > 0) await sleep(2);
  const elapsed = Number(process.hrtime.bigint() - t0) / 1e9;
  await runner.stop();
  await check.end();
  print({
    jobs,
    elapsed_s: elapsed,
    jobs_per_s: jobs / elapsed,
    settings,
  });
}

const PERIOD_MS = 50;
const MINUTE_MS = 60_000;

/** p50, p95, p99 and max (nearest rank) of `values`, in ms; null when empty. */
function latency(values) {
  if (values.length === 0) return null;
  const sorted = Float64Array.from(values).sort();
  const at = (q) => sorted[Math.max(1, Math.ceil(q * sorted.length)) - 1];
  return { jobs: sorted.length, p50: at(0.5), p95: at(0.95), p99: at(0.99), max: sorted[sorted.length - 1] };
}

async function soak(minutes, rate) {
  await runMigrations({ connectionString, logger });
  const utils = await makeWorkerUtils({ connectionString, logger });
  const perMinute = Array.from({ length: minutes }, () => []);
  const t0 = Date.now();
  const runner = await worker(async (_payload, helpers) => {
    const started = Date.now();
    const minute = Math.floor((started - t0) / MINUTE_MS);
    if (minute < minutes) perMinute[minute].push(started - new Date(helpers.job.run_at).getTime());
  });
  const perAdd = Math.max(1, Math.round((rate * PERIOD_MS) / 1000));
  const end = t0 + minutes * MINUTE_MS;
  let added = 0;
  for (let next = t0; next < end; next += PERIOD_MS) {
    const wait = next - Date.now();
    if (wait > 0) await sleep(wait);
    await utils.addJobs(Array.from({ length: perAdd }, () => ({ identifier: "noop", payload: {} })));
    added += perAdd;
    if ((next - t0) % MINUTE_MS === 0 && next > t0) {
      const m = (next - t0) / MINUTE_MS;
      console.error(`minute ${m}: add → start ${JSON.stringify(latency(perMinute[m - 1]))}`);
    }
  }
  const check = new Client({ connectionString });
  await check.connect();
  while ((await remaining(check)) > 0) await sleep(10);
  await check.end();
  await runner.stop();
  await utils.release();
  print({
    minutes,
    rate,
    jobs: added,
    add_to_start_ms: latency(perMinute.flat()),
    per_minute: perMinute.map(latency),
    settings,
  });
}

const [mode, ...args] = process.argv.slice(2);
const number = (text, fallback) => Number.parseInt(text ?? `${fallback}`, 10);
const main =
  mode === "prepare"
    ? () => prepare(number(args[0], 20000))
    : mode === "run"
      ? () => timed(number(args[0], 20000))
      : mode === "soak"
        ? () => soak(number(args[0], 10), number(args[1], 3000))
        : null;
if (!main || !connectionString) {
  console.error("usage: DATABASE_URL=... node bench.cjs prepare|run JOBS, or soak MINUTES RATE");
  process.exit(2);
}
main().catch((error) => {
  console.error(error);
  process.exit(1);
});
