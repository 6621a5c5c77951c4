// Graphile Worker, side by side with rara-bench: `scripts/graphile-bench.sh` runs this twice on
// a scratch database (DATABASE_URL), see BENCHMARKS.md.
//
//   node bench.cjs prepare JOBS   Graphile Worker's migrations, then JOBS noop jobs in one
//                                 addJobs call (before the clock, like rara-bench's submission)
//   node bench.cjs run JOBS       a worker (run()) with the settings below, timed from start
//                                 until no job is left (completed jobs are deleted); prints
//                                 one JSON line
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
  const runner = await run({
    connectionString,
    concurrency: settings.concurrency,
    maxPoolSize: settings.maxPoolSize,
    noHandleSignals: true,
    logger,
    taskList: { noop: async () => {} },
    preset: {
      worker: {
        localQueue: { size: settings.localQueueSize },
        completeJobBatchDelay: settings.completeJobBatchDelay,
        failJobBatchDelay: settings.failJobBatchDelay,
      },
    },
  });
  runner.events.on("job:success", () => {
    succeeded += 1;
    if (succeeded === jobs) allDone();
  });
  await done;
  // The completions are batched: the clock stops when the last one is committed.
  while ((await remaining(check)) > 0) await new Promise((r) => setTimeout(r, 2));
  const elapsed = Number(process.hrtime.bigint() - t0) / 1e9;
  await runner.stop();
  await check.end();
  console.log(
    JSON.stringify({
      system: "graphile-worker",
      version,
      node: process.version,
      jobs,
      elapsed_s: elapsed,
      jobs_per_s: jobs / elapsed,
      settings,
    }),
  );
}

const [mode, jobsArg] = process.argv.slice(2);
const jobs = Number.parseInt(jobsArg ?? "20000", 10);
const main = mode === "prepare" ? prepare : mode === "run" ? timed : null;
if (!main || !connectionString) {
  console.error("usage: DATABASE_URL=... node bench.cjs prepare|run JOBS");
  process.exit(2);
}
main(jobs).catch((error) => {
  console.error(error);
  process.exit(1);
});
