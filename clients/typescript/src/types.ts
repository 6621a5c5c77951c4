/** What the API answers: the schemas of docs/openapi.json, and the run as GET /api/runs/{id} gives it. */
import type { components } from "./schema.js";

type S = components["schemas"];
export type SubmitResponse = S["SubmitResponse"];
export type ValidateResponse = S["ValidateResponse"];
export type Problem = S["ProblemBody"];
export type RegisterResponse = S["RegisterResponse"];
export type RunPage = S["RunPage"];
export type CancelResponse = S["CancelResponse"];
export type RetryResponse = S["RetryResponse"];
export type RerunResponse = S["RerunResponse"];
export type SignalResponse = S["SignalResponse"];
export type EventResponse = S["EventResponse"];
export type FiredResponse = S["FiredResponse"];
export type CreateSchedule = S["CreateRequest"];

export interface Progress {
  fraction: number;
  message: string;
}

export interface Artifact {
  id: number;
  attempt: number;
  name: string;
  uri: string;
  media_type: string | null;
  size_bytes: number | null;
  digest: string | null;
  created_at: string;
}

export interface Step {
  id: string;
  name: string;
  operation: string;
  version: string | null;
  status: string;
  attempt: number;
  max_attempts: number;
  progress: Progress | null;
  output: unknown;
  error: Record<string, unknown> | null;
  finished_at: string | null;
  depends_on: string[];
  artifacts: Artifact[];
  map_size?: number;
  parent?: string;
  map_index?: number;
  waiting_for?: string;
}

export interface Run {
  id: string;
  name: string;
  status: string;
  idempotency_key: string | null;
  inputs: Record<string, unknown>;
  output?: unknown;
  output_error?: string;
  created_at: string;
  finished_at: string | null;
  workflow_version?: number;
  steps: Step[];
}

export const RUN_FINISHED: ReadonlySet<string> = new Set(["succeeded", "failed", "cancelled"]);
