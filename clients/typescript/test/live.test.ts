// Against a live `rara ui` with `rara dev` executing (scripts/test-clients.sh starts them and
// sets RARA_API_URL and RARA_API_TOKEN): typed errors from the server, paging, validation
// before submit, a watch to the end with an artifact, and examples/typescript/rebuild-index.ts.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash, randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { test } from "node:test";

import { BadRequestError, ConflictError, InvalidWorkflowError, NotFoundError, RaraClient, UnauthorizedError } from "../src/index.js";

const live = Boolean(process.env.RARA_API_URL);
if (process.env.RARA_TEST_LIVE === "1" && !live) throw new Error("RARA_TEST_LIVE=1 but RARA_API_URL is not set");
const skip = live ? false : "no live server: scripts/test-clients.sh runs these";
const noop = (name: string) => ({ name, steps: [{ name: "a", operation: "noop" }] });

test("errors the server gives are typed, with field and exit code", { skip }, async () => {
  const rara = new RaraClient();
  await assert.rejects(rara.getRun(randomUUID()), (e) => e instanceof NotFoundError && e.exitCode === 3);
  await assert.rejects(rara.listRuns({ cursor: "nope" }), (e) => e instanceof BadRequestError && e.field === "cursor");
  await assert.rejects(new RaraClient({ token: "wrong" }).submit(noop("x")), (e) => e instanceof UnauthorizedError);
  const bad = { name: "bad", steps: [{ name: "a", operation: "noop", depends_on: ["zz"] }] };
  await assert.rejects(rara.submit(bad), (e) => e instanceof InvalidWorkflowError && e.status === 422
    && e.field === "definition.steps[0].depends_on[0]" && e.exitCode === 4);
  await rara.register(noop("ts-scheduled"));
  const schedule = { name: `ts-${randomUUID()}`, workflow: "ts-scheduled", every_seconds: 3600 };
  await rara.createSchedule(schedule);
  await assert.rejects(rara.createSchedule(schedule), (e) => e instanceof ConflictError && e.field === "name");
  await rara.pauseSchedule(schedule.name);
  assert.equal((await rara.getSchedule(schedule.name)).paused, true);
  await rara.deleteSchedule(schedule.name);
});

test("a wrong reference fails validation with its field before anything is submitted", { skip }, async () => {
  const rara = new RaraClient();
  const wrong = { name: "ts-wrong", inputs: { text: { type: "string" } },
    steps: [{ name: "a", operation: "noop", input: { t: { $input: "/txt" } } }] };
  const before = (await rara.listRuns({ name: "ts-wrong" })).runs.length;
  await assert.rejects(rara.submit(wrong, { inputs: { text: "x" }, check: true }),
    (e) => e instanceof InvalidWorkflowError && e.field === "definition.steps[0].input.t" && e.problems.length === 1);
  assert.equal((await rara.listRuns({ name: "ts-wrong" })).runs.length, before);
});

test("runs are listed page by page", { skip }, async () => {
  const rara = new RaraClient();
  const name = `ts-paged-${randomUUID()}`;
  for (let i = 0; i < 3; i++) await rara.submit(noop(name));
  const first = await rara.listRuns({ name, limit: 2 });
  assert.equal(first.runs.length, 2);
  assert.ok(first.next_cursor);
  const second = await rara.listRuns({ name, limit: 2, cursor: first.next_cursor ?? undefined });
  assert.equal(second.runs.length, 1);
  assert.equal(second.next_cursor ?? null, null);
});

test("a run is watched to its end and its artifact downloaded", { skip }, async () => {
  const rara = new RaraClient();
  const { id } = await rara.submit({ name: "ts-watched", steps: [
    { name: "count", operation: "text.stats", version: "1.0.0", input: { text: "a b b", top: 2 } },
    { name: "nap", operation: "sleep", input: { seconds: 1 }, depends_on: ["count"] }] });
  const seen = [];
  for await (const change of rara.watch(id)) seen.push(change);
  const last = seen.at(-1);
  assert.ok(last && last.kind === "finished" && last.run.status === "succeeded");
  const steps = seen.flatMap((c) => (c.kind === "step" ? [`${c.step.name}:${c.step.status}`] : []));
  assert.ok(steps.includes("count:succeeded") && steps.includes("nap:succeeded"), steps.join(" "));
  assert.ok(steps.length > 2, `changes along the way: ${steps.join(" ")}`);
  const artifact = last.run.steps[0]!.artifacts[0]!;
  const bytes = await rara.downloadArtifact(artifact);
  assert.equal(`sha256:${createHash("sha256").update(bytes).digest("hex")}`, artifact.digest);
});

test("examples/typescript/rebuild-index.ts runs end to end", { skip }, async () => {
  const example = fileURLToPath(new URL("../../../examples/typescript/rebuild-index.js", import.meta.url));
  const { stdout } = await promisify(execFile)(process.execPath, [example, "3"], { timeout: 120_000 });
  const lines = stdout.split("\n");
  assert.match(lines[0]!, /^run /);
  assert.ok(lines.some((l) => l.includes("stats[0]") && l.includes("(attempt")), stdout);
  const end = lines.findIndex((l) => l.endsWith("succeeded") && l.includes("rebuild-index"));
  assert.ok(end > 0, stdout);
  const output = JSON.parse(lines.slice(end + 1).join("\n"));
  assert.equal(output.paragraphs, 3);
  assert.equal(output.top_words.length, 3);
});
