// Evaluates recorded AWS calls against the identity policies the template gives each role,
// with a real IAM simulator (@cloud-copilot/iam-simulate: identity policies, the template's
// queue policies as resource policies, resource ARNs, conditions; actions validated against
// iam-data). Calls are made over TLS (aws:SecureTransport true), in the template's account.
//
// A call is a JSON line: {"role", "action", "resource", "site", "template"?, "context"?}.
// `resource` is a literal ARN, GetAtt:Id.Attr, Ref:Name or Sub:text of the template;
// `context`, the request's own condition keys (S3 ListBucket's s3:prefix). The roles `harness`
// (the tests' own setup) and `local` (rara dev's LocalStack stack) are counted, not
// evaluated; `unattributed` fails.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { join, resolve as resolvePath } from 'node:path'
import { runSimulation } from '@cloud-copilot/iam-simulate'
import { ACCOUNT, identityPolicies, loadTemplate, resourceArn, resourcePolicy } from './render.mjs'

export const NOT_EVALUATED = new Set(['harness', 'local'])

/** The call lines of `paths` (files, or directories of *.jsonl files). */
export function readCalls(paths) {
  const calls = []
  for (const path of paths) {
    if (!existsSync(path)) continue // a suite that made no AWS call leaves no directory
    const files = statSync(path).isDirectory()
      ? readdirSync(path).filter((f) => f.endsWith('.jsonl')).sort().map((f) => join(path, f))
      : [path]
    for (const file of files) {
      for (const line of readFileSync(file, 'utf8').split('\n')) {
        if (line.trim()) calls.push(JSON.parse(line))
      }
    }
  }
  return calls
}

/**
 * Each distinct (template, role, action, resource) of `calls` with its count, sites and
 * decision. `options.template` overrides every call's template; `options.root` is where
 * relative template paths are read from.
 */
export async function evaluate(calls, options = {}) {
  const root = options.root ?? process.cwd()
  const groups = new Map()
  for (const call of calls) {
    const template = options.template ?? call.template ?? 'infra/template.yaml'
    // The harness's own calls are counted per action (its queues have a name per test).
    const resource = NOT_EVALUATED.has(call.role) ? '(test setup)' : call.resource
    const context = call.context ?? {}
    const key = JSON.stringify([template, call.role, call.action, resource, context])
    const group = groups.get(key) ?? { template, role: call.role, action: call.action, resource, context, count: 0, sites: new Map() }
    group.count += 1
    group.sites.set(call.site, (group.sites.get(call.site) ?? 0) + 1)
    groups.set(key, group)
  }
  const templates = new Map()
  const results = []
  for (const group of groups.values()) {
    results.push({ ...group, ...(await decide(group, templates, root)) })
  }
  results.sort((a, b) => [a.role, a.action, a.resource].join(' ').localeCompare([b.role, b.action, b.resource].join(' ')))
  return results
}

async function decide(group, templates, root) {
  if (NOT_EVALUATED.has(group.role)) return { decision: 'not evaluated' }
  if (group.role === 'unattributed' || !group.role) {
    return { decision: 'Unattributed', reason: 'no function or CLI frame names the caller' }
  }
  try {
    if (!templates.has(group.template)) templates.set(group.template, loadTemplate(resolvePath(root, group.template)))
    const template = templates.get(group.template)
    const arn = resourceArn(template, group.resource)
    const policies = identityPolicies(template, group.role)
    const principal = `arn:aws:iam::${ACCOUNT}:role/${group.role}`
    const simulation = {
      request: {
        principal,
        action: group.action,
        resource: { resource: arn, accountId: ACCOUNT },
        contextVariables: {
          ...group.context,
          'aws:SecureTransport': 'true', 'aws:PrincipalArn': principal, 'aws:PrincipalAccount': ACCOUNT,
        },
      },
      identityPolicies: policies,
      resourcePolicy: resourcePolicy(template, arn) ?? undefined,
      serviceControlPolicies: [],
      resourceControlPolicies: [],
    }
    const result = await runSimulation(simulation, {})
    if (result.resultType === 'error') {
      return { decision: 'Error', arn, reason: JSON.stringify(result.errors) }
    }
    return { decision: result.overallResult, arn }
  } catch (error) {
    return { decision: 'Error', reason: error.message }
  }
}

export const passes = (result) => result.decision === 'Allowed' || result.decision === 'not evaluated'

/** The summary table and, for each call that fails, its sites. */
export function report(results) {
  const rows = [['role', 'action', 'resource', 'calls', 'decision']]
  const shown = (r) => r.resource + Object.entries(r.context ?? {}).map(([k, v]) => ` (${k}=${v})`).join('')
  for (const r of results) rows.push([r.role, r.action, shown(r), String(r.count), r.decision])
  const widths = rows[0].map((_, i) => Math.max(...rows.map((row) => row[i].length)))
  const lines = rows.map((row) => row.map((cell, i) => cell.padEnd(widths[i])).join('  ').trimEnd())
  lines.splice(1, 0, widths.map((w) => '-'.repeat(w)).join('  '))
  for (const r of results.filter((x) => !passes(x))) {
    lines.push('')
    lines.push(`DENIED ${r.role} ${r.action} on ${r.arn ?? r.resource} (${r.resource}) [${r.decision}${r.reason ? `: ${r.reason}` : ''}]`)
    for (const [site, count] of r.sites) lines.push(`  at ${site} (${count} call${count === 1 ? '' : 's'})`)
  }
  return lines.join('\n')
}
