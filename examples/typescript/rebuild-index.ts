/**
 * Rebuild a word index from TypeScript: submit the workflow of examples/rebuild-index.yaml,
 * watch it with a progress line per step change, print the run's outputs.
 *
 *   cd clients/typescript && npm ci && npm run build
 *   RARA_API_URL=http://127.0.0.1:7878 RARA_API_TOKEN=... node dist/examples/typescript/rebuild-index.js
 */
import { RaraClient, fraction } from "../../clients/typescript/src/index.js";

const TEXT = `rara runs workflow steps on AWS Lambda, safely, cheaply and fast.

A scheduler leases due steps in Postgres and enqueues them on SQS; an executor claims each step.

Postgres is the source of truth; SQS only delivers.`;

/** The same definition as examples/rebuild-index.yaml. */
export const rebuildIndex = {
  name: "rebuild-index",
  inputs: { text: { type: "string" }, top: { type: "integer", default: 5 } },
  output: {
    paragraphs: { $output: "merge", pointer: "/parts" },
    words: { $output: "merge", pointer: "/words" },
    top_words: { $output: "merge", pointer: "/top_words" },
  },
  steps: [
    { name: "split", operation: "text.split", input: { text: { $input: "/text" }, by: "paragraph" } },
    {
      name: "stats", operation: "text.stats", version: "1.0.0", for_each: { $output: "split", pointer: "/parts" },
      max_concurrency: 2, input: { text: { $item: "/text" }, top: 3 }, depends_on: ["split"],
    },
    { name: "merge", operation: "stats.merge", input: { stats: { $output: "stats" }, top: { $input: "/top" } }, depends_on: ["stats"] },
    { name: "publish", operation: "sleep", input: { seconds: 1 }, depends_on: ["merge"] },
  ],
};

async function main(): Promise<number> {
  const top = Number(process.argv[2] ?? 5);
  const rara = new RaraClient();
  const { id } = await rara.submit(rebuildIndex, { inputs: { text: TEXT, top }, check: true });
  console.log(`run ${id}`);
  const started = performance.now();
  for await (const change of rara.watch(id)) {
    if (change.kind === "step") {
      const s = change.step;
      const seconds = ((performance.now() - started) / 1000).toFixed(1).padStart(6);
      const message = s.progress?.message ? ` ${s.progress.message}` : "";
      console.log(`${seconds}s  ${s.name.padEnd(12)} ${s.status} (attempt ${s.attempt}/${s.max_attempts}) ${Math.round(fraction(s) * 100)}%${message}`);
    } else {
      console.log(`run ${change.run.id}  ${change.run.name}  ${change.run.status}`);
      console.log(JSON.stringify(change.run.output, null, 2));
      return change.run.status === "succeeded" ? 0 : 1;
    }
  }
  return 1;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().then((code) => process.exit(code), (e) => { console.error(e); process.exit(1); });
}
