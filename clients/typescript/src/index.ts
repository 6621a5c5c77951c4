/**
 * rara from TypeScript (Node 20 and browsers): a thin fetch client of rara's HTTP API, its
 * types generated from docs/openapi.json (src/schema.d.ts, openapi-typescript), typed errors,
 * retries for idempotent calls, and `watch`, an async iterator of a run's step changes.
 */
import { ApiError, ConnectionFailedError, DigestMismatchError, InvalidWorkflowError, UnexpectedResponseError, errorFrom } from "./errors.js";
import type * as t from "./types.js";
import { EventLines, changes, type WatchEvent } from "./watch.js";

export * from "./errors.js";
export type * from "./types.js";
export { RUN_FINISHED } from "./types.js";
export { EventLines, changes, fraction, type RunFinished, type StepChange, type WatchEvent } from "./watch.js";
export type { components, paths } from "./schema.js";

export interface Retry {
  attempts: number;
  initialDelayMs: number;
  maxDelayMs: number;
}

export interface ClientOptions {
  /** The API's base URL (default: `RARA_API_URL`). */
  url?: string;
  /** The token `rara ui` prints (default: `RARA_API_TOKEN`). */
  token?: string;
  retry?: Partial<Retry>;
  fetch?: typeof fetch;
}

export interface WatchOptions {
  pollIntervalMs?: number;
  resyncAfterMs?: number;
  maxReconnects?: number;
}

/** A definition: the JSON object, or its YAML or JSON text. */
export type Definition = Record<string, unknown> | string;

interface Call {
  method: "GET" | "POST" | "DELETE";
  path: string;
  body?: unknown;
  query?: Record<string, string | number | string[] | undefined>;
  /** Safe to send again after a 5xx or a lost connection (a refused one is always retried). */
  idempotent: boolean;
}

const env = (name: string): string | undefined =>
  typeof process !== "undefined" ? process.env[name] : undefined;
const seg = encodeURIComponent;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class RaraClient {
  readonly url: string;
  private readonly headers: Record<string, string>;
  private readonly retry: Retry;
  private readonly fetch: typeof fetch;

  constructor(options: ClientOptions = {}) {
    const url = options.url ?? env("RARA_API_URL");
    if (!url) throw new Error("no API URL: pass url or set RARA_API_URL");
    this.url = url.replace(/\/+$/, "");
    const token = options.token ?? env("RARA_API_TOKEN");
    this.headers = { accept: "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) };
    this.retry = { attempts: 4, initialDelayMs: 200, maxDelayMs: 5000, ...options.retry };
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  private delay(attempt: number): number {
    return Math.random() * Math.min(this.retry.maxDelayMs, this.retry.initialDelayMs * 2 ** (attempt - 1));
  }

  private async send<T>(call: Call): Promise<T> {
    const query = Object.entries(call.query ?? {}).filter(([, v]) => v !== undefined);
    // An array is the parameter repeated (`where`).
    const pairs = query.flatMap(([k, v]) => (Array.isArray(v) ? v.map((item) => [k, item]) : [[k, String(v)]]));
    const search = pairs.length ? `?${new URLSearchParams(pairs)}` : "";
    const body = call.body ?? (call.method === "POST" ? {} : undefined);
    for (let attempt = 1; ; attempt++) {
      let response: Response;
      try {
        response = await this.fetch(`${this.url}${call.path}${search}`, {
          method: call.method,
          headers: body === undefined ? this.headers : { ...this.headers, "content-type": "application/json" },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
      } catch (e) {
        // fetch does not say whether the request left: only an idempotent call is sent again.
        if (attempt >= this.retry.attempts || !call.idempotent) {
          throw new ConnectionFailedError(`${call.method} ${call.path}: ${String(e)}`, { cause: e });
        }
        await sleep(this.delay(attempt));
        continue;
      }
      if (call.idempotent && attempt < this.retry.attempts && (response.status >= 500 || response.status === 429)) {
        await sleep(this.delay(attempt));
        continue;
      }
      const text = await response.text();
      let parsed: unknown = undefined;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        if (response.ok) throw new UnexpectedResponseError(`HTTP ${response.status}: not JSON`, response.status);
      }
      if (!response.ok) throw errorFrom(response.status, parsed);
      return parsed as T;
    }
  }

  // Runs.

  /** Submit a definition; `check` first asks the server's validation, so a wrong reference
   * throws `InvalidWorkflowError` with its field before anything is submitted. */
  async submit(definition: Definition, options: { inputs?: Record<string, unknown>; idempotencyKey?: string; check?: boolean } = {}): Promise<t.SubmitResponse> {
    if (options.check) await this.check(definition, options.inputs);
    const body = { definition, inputs: options.inputs ?? {}, idempotency_key: options.idempotencyKey };
    return this.send({ method: "POST", path: "/api/runs", body, idempotent: options.idempotencyKey !== undefined });
  }

  submitWorkflow(name: string, options: { inputs?: Record<string, unknown>; idempotencyKey?: string; version?: number } = {}): Promise<t.SubmitResponse> {
    const body = { inputs: options.inputs ?? {}, idempotency_key: options.idempotencyKey, version: options.version };
    return this.send({ method: "POST", path: `/api/workflows/${seg(name)}/runs`, body, idempotent: options.idempotencyKey !== undefined });
  }

  validate(definition: Definition, inputs?: Record<string, unknown>): Promise<t.ValidateResponse> {
    return this.send({ method: "POST", path: "/api/workflows/validate", body: { definition, inputs }, idempotent: true });
  }

  /** `validate`, throwing `InvalidWorkflowError` (the first problem's field) when invalid. */
  async check(definition: Definition, inputs?: Record<string, unknown>): Promise<void> {
    const { valid, problems } = await this.validate(definition, inputs);
    if (valid) return;
    const lines = problems.map((p) => `  - ${p.path || "(definition)"}: ${p.message}`).join("\n");
    const error = new InvalidWorkflowError(`the definition is invalid:\n${lines}`,
      { field: problems[0]?.field ?? "definition", exitCode: 4, status: 200 });
    error.problems = problems;
    throw error;
  }

  register(definition: Definition): Promise<t.RegisterResponse> {
    return this.send({ method: "POST", path: "/api/workflows", body: { definition }, idempotent: true });
  }

  getRun(id: string): Promise<t.Run> {
    return this.send({ method: "GET", path: `/api/runs/${seg(id)}`, idempotent: true });
  }

  /** Runs newest first, matching every filter given: `error` (a step's error code), `workflow`
   * (`NAME` or `NAME@VERSION`), `where` (`inputs.PATH=VALUE`, up to 4). */
  listRuns(filter: {
    status?: string; name?: string; created_after?: string; created_before?: string; error?: string; workflow?: string;
    where?: string[]; limit?: number; cursor?: string;
  } = {}): Promise<t.RunPage> {
    return this.send({ method: "GET", path: "/api/runs", query: filter, idempotent: true });
  }

  cancel(id: string, reason?: string): Promise<t.CancelResponse> {
    return this.send({ method: "POST", path: `/api/runs/${seg(id)}/cancel`, body: { reason }, idempotent: true });
  }

  cancelStep(stepId: string, reason?: string): Promise<t.CancelResponse> {
    return this.send({ method: "POST", path: `/api/steps/${seg(stepId)}/cancel`, body: { reason }, idempotent: true });
  }

  retryStep(stepId: string): Promise<t.RetryResponse> {
    return this.send({ method: "POST", path: `/api/steps/${seg(stepId)}/retry`, idempotent: false });
  }

  rerun(id: string, from: string, options: { inputs?: Record<string, unknown>; force?: boolean } = {}): Promise<t.RerunResponse> {
    const body = { from, inputs: options.inputs ?? {}, force: options.force ?? false };
    return this.send({ method: "POST", path: `/api/runs/${seg(id)}/rerun`, body, idempotent: false });
  }

  signal(id: string, name: string, data?: unknown, options: { id?: string; reject?: string } = {}): Promise<t.SignalResponse> {
    const body = { data, id: options.id, reject: options.reject };
    return this.send({ method: "POST", path: `/api/runs/${seg(id)}/signals/${seg(name)}`, body, idempotent: options.id !== undefined });
  }

  event(name: string, key: string, payload?: unknown, id?: string): Promise<t.EventResponse> {
    return this.send({ method: "POST", path: "/api/events", body: { name, key, payload, id }, idempotent: id !== undefined });
  }

  // Schedules.

  async listSchedules(): Promise<Record<string, unknown>[]> {
    const list = await this.send<{ schedules: Record<string, unknown>[] }>({ method: "GET", path: "/api/schedules", idempotent: true });
    return list.schedules;
  }

  getSchedule(name: string): Promise<Record<string, unknown>> {
    return this.send({ method: "GET", path: `/api/schedules/${seg(name)}`, idempotent: true });
  }

  createSchedule(request: t.CreateSchedule): Promise<Record<string, unknown>> {
    return this.send({ method: "POST", path: "/api/schedules", body: request, idempotent: false });
  }

  pauseSchedule(name: string): Promise<unknown> {
    return this.send({ method: "POST", path: `/api/schedules/${seg(name)}/pause`, idempotent: true });
  }

  resumeSchedule(name: string): Promise<unknown> {
    return this.send({ method: "POST", path: `/api/schedules/${seg(name)}/resume`, idempotent: true });
  }

  triggerSchedule(name: string): Promise<t.FiredResponse> {
    return this.send({ method: "POST", path: `/api/schedules/${seg(name)}/trigger`, idempotent: false });
  }

  async deleteSchedule(name: string): Promise<void> {
    await this.send({ method: "DELETE", path: `/api/schedules/${seg(name)}`, idempotent: true });
  }

  // Artifacts.

  /** An artifact's bytes (following S3's presigned redirect, to which fetch sends no token). */
  /**
   * An artifact's bytes (following S3's presigned redirect). Given the artifact itself (a
   * step's `artifacts[i]`), its recorded sha256 is checked: a `DigestMismatchError` otherwise.
   */
  async downloadArtifact(artifact: t.Artifact | number): Promise<Uint8Array> {
    const id = typeof artifact === "number" ? artifact : artifact.id;
    const response = await this.fetch(`${this.url}/api/artifacts/${id}`, { headers: this.headers, redirect: "follow" });
    if (!response.ok) throw errorFrom(response.status, await response.json().catch(() => undefined));
    const bytes = new Uint8Array(await response.arrayBuffer());
    if (typeof artifact !== "number" && artifact.digest) await checkDigest(id, artifact.digest, bytes);
    return bytes;
  }

  // Watching.

  /** Each step change of the run, then `{kind: "finished", run}`. */
  async *watch(id: string, options: WatchOptions = {}): AsyncGenerator<WatchEvent> {
    const { pollIntervalMs = 1000, resyncAfterMs = 30000, maxReconnects = 20 } = options;
    let run = await this.getRun(id);
    yield* changes(undefined, run);
    let failures = 0;
    while (!RUN_DONE(run)) {
      try {
        for await (const next of this.liveReads(id, pollIntervalMs, resyncAfterMs)) {
          failures = 0;
          yield* changes(run, next);
          run = next;
          if (RUN_DONE(run)) return;
        }
      } catch (e) {
        // The API's answer (a 404: the run is gone) ends the watch; a lost connection does not.
        if (e instanceof ApiError || e instanceof UnexpectedResponseError) throw e;
        failures += 1;
        if (failures > maxReconnects) throw new ConnectionFailedError(`watching ${id}: gave up after ${failures - 1} reconnects`, { cause: e });
        await sleep(this.delay(Math.min(failures, 6)));
      }
    }
  }

  /** The run, read again on each event of the live stream (and on connecting, and after
   * `resyncAfterMs` of quiet); polled where the server has no stream (204, 401). */
  private async *liveReads(id: string, pollIntervalMs: number, resyncAfterMs: number): AsyncGenerator<t.Run> {
    const abort = new AbortController();
    // The read under way when the watch ends is rejected by the abort: nobody awaits it.
    let pending: Promise<ReadableStreamReadResult<string>> | undefined;
    try {
      const response = await this.fetch(`${this.url}/runs/${seg(id)}/events`, {
        headers: { ...this.headers, accept: "text/event-stream" },
        signal: abort.signal,
      });
      if (response.status !== 200 || !response.body || !response.headers.get("content-type")?.startsWith("text/event-stream")) {
        for (;;) {
          yield await this.getRun(id);
          await sleep(pollIntervalMs);
        }
      }
      yield await this.getRun(id);
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      const lines = new EventLines();
      pending = reader.read();
      for (;;) {
        let timer: ReturnType<typeof setTimeout> | undefined;
        const quiet = new Promise<null>((resolve) => { timer = setTimeout(() => resolve(null), resyncAfterMs); });
        const read = await Promise.race([pending, quiet]);
        clearTimeout(timer);
        if (read === null) {
          yield await this.getRun(id);
          continue;
        }
        if (read.done) return;
        pending = reader.read();
        if (lines.feed(read.value) > 0) yield await this.getRun(id);
      }
    } finally {
      pending?.catch(() => undefined);
      abort.abort();
    }
  }

  /** The run once it ended. */
  async wait(id: string, options: WatchOptions = {}): Promise<t.Run> {
    for await (const change of this.watch(id, options)) {
      if (change.kind === "finished") return change.run;
    }
    throw new Error(`watching ${id} ended before the run`);
  }
}

function RUN_DONE(run: t.Run): boolean {
  return run.status === "succeeded" || run.status === "failed" || run.status === "cancelled";
}

/** Throws `DigestMismatchError` unless `bytes` hash to `digest` (`sha256:<hex>`). */
async function checkDigest(id: number, digest: string, bytes: Uint8Array<ArrayBuffer>): Promise<void> {
  const expected = digest.replace(/^sha256:/, "");
  const hash = new Uint8Array(await globalThis.crypto.subtle.digest("SHA-256", bytes));
  const actual = Array.from(hash, (b) => b.toString(16).padStart(2, "0")).join("");
  if (actual !== expected) {
    throw new DigestMismatchError(`artifact ${id}: sha256 ${actual} is not the recorded ${expected}`, expected, actual);
  }
}
