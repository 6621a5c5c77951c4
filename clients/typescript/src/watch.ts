/**
 * Watching a run: what moved between two reads of it, and the server-sent event lines that say
 * when to read again (the console's live stream, `GET /runs/{id}/events`).
 */
import { RUN_FINISHED, type Run, type Step } from "./types.js";

/** A step whose status, attempt, progress or wait moved (`previous` undefined: first seen). */
export interface StepChange {
  kind: "step";
  step: Step;
  previous: Step | undefined;
  run: Run;
}

/** The run ended: the last thing a watch yields. */
export interface RunFinished {
  kind: "finished";
  run: Run;
}

export type WatchEvent = StepChange | RunFinished;

function state(step: Step): string {
  return JSON.stringify([step.status, step.attempt, step.progress, step.waiting_for ?? null, step.map_size ?? null]);
}

/** What moved from `before` to `after`, and the run's end once it ended. */
export function changes(before: Run | undefined, after: Run): WatchEvent[] {
  const seen = new Map((before?.steps ?? []).map((s) => [s.id, s]));
  const moved: WatchEvent[] = [];
  for (const step of after.steps) {
    const previous = seen.get(step.id);
    if (!previous || state(previous) !== state(step)) moved.push({ kind: "step", step, previous, run: after });
  }
  if (RUN_FINISHED.has(after.status)) moved.push({ kind: "finished", run: after });
  return moved;
}

/** How far a step got, 0 to 1 (1 once it succeeded). */
export function fraction(step: Step): number {
  return step.status === "succeeded" ? 1 : (step.progress?.fraction ?? 0);
}

/** Event-stream text in, the number of complete events out (comments, the keep-alives, are none). */
export class EventLines {
  private buffer = "";
  private pending = false;

  feed(text: string): number {
    this.buffer += text;
    let events = 0;
    let end: number;
    while ((end = this.buffer.indexOf("\n")) >= 0) {
      const line = this.buffer.slice(0, end).replace(/\r$/, "");
      this.buffer = this.buffer.slice(end + 1);
      if (line === "") {
        if (this.pending) events += 1;
        this.pending = false;
      } else if (!line.startsWith(":")) {
        this.pending = true;
      }
    }
    return events;
  }
}
