#!/usr/bin/env node
// iam-check [--template PATH] [--root DIR] [--json] CALLS...: evaluates the recorded calls (files or
// directories of *.jsonl) and prints the summary; exits 1 when any call is denied, cannot be
// attributed or cannot be evaluated, 2 when there is nothing to check.
import { parseArgs } from 'node:util'
import { evaluate, passes, readCalls, report } from '../src/check.mjs'

const { values, positionals } = parseArgs({
  options: { template: { type: 'string' }, root: { type: 'string' }, json: { type: 'boolean' } },
  allowPositionals: true,
})
if (positionals.length === 0) {
  console.error('usage: iam-check [--template PATH] [--root DIR] [--json] CALLS...')
  process.exit(2)
}
const calls = readCalls(positionals)
if (calls.length === 0) {
  console.error(`iam-check: no calls recorded in ${positionals.join(' ')}`)
  process.exit(2)
}
const results = await evaluate(calls, { template: values.template, root: values.root })
if (values.json) {
  console.log(JSON.stringify(results.map((r) => ({ ...r, sites: Object.fromEntries(r.sites) }))))
} else {
  console.log(report(results))
}
const failed = results.filter((r) => !passes(r))
const evaluated = results.filter((r) => r.decision !== 'not evaluated').reduce((n, r) => n + r.count, 0)
const say = values.json ? console.error : console.log
say(`\n${calls.length} calls, ${evaluated} evaluated, ${failed.reduce((n, r) => n + r.count, 0)} denied`)
process.exit(failed.length > 0 ? 1 : 0)
