// What needs no server: each error code's class, the event-stream reader, the diff of two reads.
import assert from "node:assert/strict";
import { test } from "node:test";

import { createHash } from "node:crypto";

import { ApiError, DigestMismatchError, ERRORS, EventLines, InvalidWorkflowError, NotWaitingError, RaraClient, RerunRefusedError, UnexpectedResponseError, changes, errorFrom } from "../src/index.js";
import type { Artifact, Run, Step } from "../src/index.js";

const CODES = ["bad_request", "unauthorized", "forbidden", "not_found", "misdirected", "invalid_workflow", "conflict",
  "payload_too_large", "unsupported_media_type", "internal", "unavailable", "too_many", "invalid_payload",
  "not_waiting", "rerun_refused", "SECRET_NOT_GRANTED"];

test("every API error code has its class, with its field and exit code", () => {
  assert.deepEqual(Object.keys(ERRORS).sort(), [...CODES].sort());
  for (const code of CODES) {
    const e = errorFrom(409, { code, message: "m", field: "f", exit_code: 9 });
    assert.ok(e instanceof ERRORS[code]!, code);
    assert.ok(e instanceof ApiError);
    assert.equal((e as ApiError).code, code);
    assert.equal((e as ApiError).field, "f");
    assert.equal((e as ApiError).exitCode, 9);
  }
  assert.ok(errorFrom(409, { code: "not_waiting", message: "m", exit_code: 9 }) instanceof NotWaitingError);
  assert.ok(errorFrom(409, { code: "rerun_refused", message: "m", exit_code: 10 }) instanceof RerunRefusedError);
  assert.ok(errorFrom(422, { code: "invalid_workflow", message: "m", exit_code: 4 }) instanceof InvalidWorkflowError);
  const unknown = errorFrom(418, { code: "teapot", message: "m", exit_code: 1 });
  assert.equal(unknown.constructor, ApiError);
  assert.ok(errorFrom(502, undefined) instanceof UnexpectedResponseError);
});

test("the event-stream reader counts events, not keep-alives, across chunks", () => {
  const lines = new EventLines();
  assert.equal(lines.feed(":\n\n"), 0);
  assert.equal(lines.feed("event: update\ndata: <div"), 0);
  assert.equal(lines.feed(">\n\nevent: update\r\ndata: x\r\n\r\n"), 2);
});

function step(name: string, status: string, fraction?: number): Step {
  return { id: name, name, operation: "noop", version: null, status, attempt: 1, max_attempts: 3,
    progress: fraction === undefined ? null : { fraction, message: "" }, output: null, error: null,
    finished_at: null, depends_on: [], artifacts: [] };
}

function run(status: string, steps: Step[]): Run {
  return { id: "r", name: "n", status, idempotency_key: null, inputs: {}, created_at: "", finished_at: null, steps };
}

test("a change is a step that moved, and the end is the run's", () => {
  const first = run("running", [step("a", "running", 0.1), step("b", "pending")]);
  assert.deepEqual(changes(undefined, first).map((c) => c.kind === "step" && c.step.name), ["a", "b"]);
  const second = run("running", [step("a", "running", 0.5), step("b", "pending")]);
  assert.deepEqual(changes(first, second).map((c) => c.kind === "step" && c.step.name), ["a"]);
  const done = run("succeeded", [step("a", "succeeded"), step("b", "succeeded")]);
  assert.deepEqual(changes(second, done).map((c) => c.kind), ["step", "step", "finished"]);
});

test("a downloaded artifact is checked against its recorded digest", async () => {
  const body = new TextEncoder().encode("the artifact's bytes");
  const fetch = (async () => new Response(body, { status: 200 })) as typeof globalThis.fetch;
  const rara = new RaraClient({ url: "http://rara.invalid", fetch });
  const sha = createHash("sha256").update(body).digest("hex");
  const artifact: Artifact = { id: 7, attempt: 1, name: "report", uri: "s3://b/k", media_type: null,
    size_bytes: body.length, digest: `sha256:${sha}`, created_at: "" };
  assert.deepEqual(await rara.downloadArtifact(artifact), body);
  assert.deepEqual(await rara.downloadArtifact(7), body, "an id alone is not checked");
  const other = { ...artifact, digest: `sha256:${"0".repeat(64)}` };
  await assert.rejects(rara.downloadArtifact(other), (e: unknown) =>
    e instanceof DigestMismatchError && e.actual === sha && e.expected === "0".repeat(64));
});

test("a search's where conditions are the parameter repeated", async () => {
  const asked: string[] = [];
  const fetch = (async (url: string | URL | Request) => {
    asked.push(String(url));
    return new Response(JSON.stringify({ runs: [], next_cursor: null }), { status: 200 });
  }) as typeof globalThis.fetch;
  const rara = new RaraClient({ url: "http://rara.invalid", fetch });
  await rara.listRuns({ error: "E_BROKEN", workflow: "billing@2", where: ["inputs.tenant=acme", "inputs.region=eu"] });
  assert.equal(asked[0], "http://rara.invalid/api/runs?error=E_BROKEN&workflow=billing%402"
    + "&where=inputs.tenant%3Dacme&where=inputs.region%3Deu");
});
