// The evaluator's own tests: `scripts/check-iam.sh test` (node --test).
import assert from 'node:assert/strict'
import { fileURLToPath } from 'node:url'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
import { evaluate, passes, readCalls, report } from '../src/check.mjs'
import { identityPolicies, loadTemplate } from '../src/render.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '../../..')
const OLD = 'tools/iam-check/test/fixtures/template-d8e1b54.yaml'
// Recorded by shared/runtime/tests/iam.rs: a packed message whose retrying step moves.
const PACKED = join(here, 'fixtures/packed-retry.jsonl')

const failures = (results) => results.filter((r) => !passes(r))

test('the executor move is denied by the d8e1b54 ExecutorRole, named with its site', async () => {
  const results = await evaluate(readCalls([PACKED]), { root, template: OLD })
  const denied = failures(results)
  assert.equal(denied.length, 1)
  assert.deepEqual(
    [denied[0].role, denied[0].action, denied[0].resource, denied[0].decision, denied[0].arn],
    ['ExecutorRole', 'sqs:SendMessage', 'GetAtt:StepQueue.Arn', 'ImplicitlyDenied', 'arn:aws:sqs:us-east-1:123456789012:StepQueue'],
  )
  const text = report(results)
  assert.match(text, /DENIED ExecutorRole sqs:SendMessage on arn:aws:sqs:us-east-1:123456789012:StepQueue/)
  assert.match(text, /at shared\/runtime\/src\/executor\/batch\/comeback\.rs:\d+ \(1 call\)/)
})

test('the same calls pass the fixed template', async () => {
  const results = await evaluate(readCalls([PACKED]), { root })
  assert.deepEqual(failures(results), [])
  const move = results.find((r) => r.role === 'ExecutorRole' && r.action === 'sqs:SendMessage')
  assert.equal(move.decision, 'Allowed')
})

test('the resource decides: the executor may not send to a queue the template does not give it', async () => {
  const call = { role: 'ExecutorRole', action: 'sqs:SendMessage', resource: 'arn:aws:sqs:us-east-1:123456789012:other', site: 'x.rs:1' }
  const [result] = await evaluate([call], { root })
  assert.equal(result.decision, 'ImplicitlyDenied')
  const [scheduler] = await evaluate([{ ...call, role: 'SchedulerRole', resource: 'GetAtt:DeadLetterQueue.Arn' }], { root })
  assert.equal(scheduler.decision, 'ImplicitlyDenied')
})

test('an unattributed call, an action IAM does not know and an unknown role fail', async () => {
  const base = { action: 'sqs:SendMessage', resource: 'GetAtt:StepQueue.Arn', site: 'x.rs:1' }
  const results = await evaluate(
    [
      { ...base, role: 'unattributed' },
      { ...base, role: 'ExecutorRole', action: 'sqs:SendMessageBatch' },
      { ...base, role: 'NoSuchRole' },
    ],
    { root },
  )
  assert.deepEqual(results.map((r) => r.decision).sort(), ['Error', 'Error', 'Unattributed'])
  assert.equal(failures(results).length, 3)
})

test('workflow secrets: under the prefix only, and only when a prefix is set', async () => {
  const secret = (name) => ({
    role: 'ExecutorRole', action: 'secretsmanager:GetSecretValue', site: 'x.rs:1',
    resource: `Sub:arn:\${AWS::Partition}:secretsmanager:\${AWS::Region}:\${AWS::AccountId}:secret:${name}-AbCdEf`,
  })
  const calls = [secret('${SecretsPrefix}api'), secret('rara/other'), { ...secret('db'), resource: 'Ref:DatabaseSecretArn' }]
  const results = await evaluate(calls, { root })
  const decision = (call) => results.find((r) => r.resource === call.resource).decision
  assert.deepEqual(calls.map(decision), ['Allowed', 'ImplicitlyDenied', 'Allowed'])
  const template = loadTemplate(join(root, 'infra/template.yaml'))
  const sids = (params) => identityPolicies(template, 'ExecutorRole', params)[0].policy.Statement.map((s) => s.Sid)
  assert.ok(sids({}).includes('WorkflowSecrets'))
  assert.ok(!sids({ SecretsPrefix: '' }).includes('WorkflowSecrets'), 'Fn::If drops the grant without a prefix')
})

test('the operator may redrive the DLQ but not consume the step queue', async () => {
  const call = (action, resource) => ({ role: 'OperatorPolicy', action, resource, site: 'cli/src/cmd/dlq/mod.rs:1' })
  const results = await evaluate(
    [
      call('sqs:ReceiveMessage', 'GetAtt:DeadLetterQueue.Arn'),
      call('sqs:DeleteMessage', 'GetAtt:DeadLetterQueue.Arn'),
      call('sqs:SendMessage', 'GetAtt:StepQueue.Arn'),
      call('sqs:DeleteMessage', 'GetAtt:StepQueue.Arn'),
    ],
    { root },
  )
  const decision = (action, resource) => results.find((r) => r.action === action && r.resource === resource).decision
  assert.equal(decision('sqs:ReceiveMessage', 'GetAtt:DeadLetterQueue.Arn'), 'Allowed')
  assert.equal(decision('sqs:DeleteMessage', 'GetAtt:DeadLetterQueue.Arn'), 'Allowed')
  assert.equal(decision('sqs:SendMessage', 'GetAtt:StepQueue.Arn'), 'Allowed')
  assert.equal(decision('sqs:DeleteMessage', 'GetAtt:StepQueue.Arn'), 'ImplicitlyDenied')
})

test("a queue policy of the template is the resource's policy: its deny wins", async () => {
  const { parseTemplate } = await import('../src/render.mjs')
  const { readFileSync, writeFileSync, mkdtempSync } = await import('node:fs')
  const { tmpdir } = await import('node:os')
  const text = readFileSync(join(root, 'infra/template.yaml'), 'utf8').replace(
    '\n  DeadLetterQueue:\n',
    `
  StepQueuePolicy:
    Type: AWS::SQS::QueuePolicy
    Properties:
      Queues: [!Ref StepQueue]
      PolicyDocument:
        Version: "2012-10-17"
        Statement:
          - Effect: Deny
            Principal: "*"
            Action: sqs:SendMessage
            Resource: !GetAtt StepQueue.Arn
            Condition: { ArnLike: { "aws:PrincipalArn": "arn:aws:iam::*:role/ExecutorRole" } }

  DeadLetterQueue:
`,
  )
  assert.ok(parseTemplate(text).Resources.StepQueuePolicy)
  const dir = mkdtempSync(join(tmpdir(), 'iam-check-'))
  writeFileSync(join(dir, 'template.yaml'), text)
  const results = await evaluate(readCalls([PACKED]), { root, template: join(dir, 'template.yaml') })
  assert.deepEqual(failures(results).map((r) => [r.role, r.action, r.decision]), [['ExecutorRole', 'sqs:SendMessage', 'ExplicitlyDenied']])
})

// The ECS agent's calls for the executor service (infra/tests/executor_service_calls.jsonl):
// each call names infra/executor-service.yaml as its template.
const SERVICE_CALLS = join(root, 'infra/tests/executor_service_calls.jsonl')

test("the executor service's roles allow exactly the ECS agent's and the executor's calls", async () => {
  const calls = readCalls([SERVICE_CALLS])
  assert.equal(calls.length, 12)
  assert.deepEqual([...new Set(calls.map((c) => c.role))], ['ExecutionRole', 'TaskRole'])
  const results = await evaluate(calls, { root })
  assert.deepEqual(failures(results), [])
  assert.ok(results.every((r) => r.template === 'infra/executor-service.yaml' && r.decision === 'Allowed'))
})

test("the executor service: a log grant dropped is named; the task role's reach", async () => {
  const { readFileSync, writeFileSync, mkdtempSync } = await import('node:fs')
  const { tmpdir } = await import('node:os')
  const original = readFileSync(join(root, 'infra/executor-service.yaml'), 'utf8')
  const text = original.replace('[logs:CreateLogStream, logs:PutLogEvents]', 'logs:CreateLogStream')
  assert.notEqual(text, original, 'the execution role grants the log calls in one statement')
  const dir = mkdtempSync(join(tmpdir(), 'iam-check-'))
  writeFileSync(join(dir, 'executor-service.yaml'), text)
  const results = await evaluate(readCalls([SERVICE_CALLS]), { root, template: join(dir, 'executor-service.yaml') })
  assert.deepEqual(failures(results).map((r) => [r.role, r.action, r.decision]), [['ExecutionRole', 'logs:PutLogEvents', 'ImplicitlyDenied']])

  // The Python executor's task role reaches the artifact store's runs/ only: not the tokens,
  // not another prefix, not a delete.
  const task = (action, resource) => ({ role: 'TaskRole', action, resource, site: 'executor', template: 'infra/executor-service.yaml' })
  const bucket = 'Sub:arn:${AWS::Partition}:s3:::${ArtifactsBucketName}'
  const denied = await evaluate(
    [
      task('secretsmanager:GetSecretValue', 'Ref:TokensSecret'),
      task('s3:PutObject', `${bucket}/elsewhere/x`),
      task('s3:DeleteObject', `${bucket}/runs/{run}/x`),
      task('s3:GetObject', 'arn:aws:s3:::another-bucket/runs/{run}/x'),
    ],
    { root },
  )
  assert.deepEqual(denied.map((r) => r.decision), ['ImplicitlyDenied', 'ImplicitlyDenied', 'ImplicitlyDenied', 'ImplicitlyDenied'])
})

// Recorded by the artifact tests (RARA_AWS_CALL_LOG, shared/platform/src/call_log/s3.rs): the
// executor's offloaded output and its read, the API's presigned GET, the operator's download
// and prune, the scheduler's prune (a ListObjectsV2 with its prefix, a DeleteObjects per key).
const S3_CALLS = join(here, 'fixtures/artifacts-s3.jsonl')

/** infra/template.yaml with `from` replaced by `to`, written to a temporary file. */
async function templateWith(from, to) {
  const { readFileSync, writeFileSync, mkdtempSync } = await import('node:fs')
  const { tmpdir } = await import('node:os')
  const original = readFileSync(join(root, 'infra/template.yaml'), 'utf8')
  const text = original.replace(from, to)
  assert.notEqual(text, original, `the template holds ${from}`)
  const dir = mkdtempSync(join(tmpdir(), 'iam-check-'))
  writeFileSync(join(dir, 'template.yaml'), text)
  return join(dir, 'template.yaml')
}

test("the artifact store's S3 calls are allowed, each as IAM authorises it", async () => {
  const calls = readCalls([S3_CALLS])
  const results = await evaluate(calls, { root })
  assert.deepEqual(failures(results), [])
  const decided = (role, action) => [...new Set(results.filter((r) => r.role === role && r.action === action).map((r) => r.decision))]
  assert.deepEqual(decided('ExecutorRole', 's3:PutObject'), ['Allowed'])
  assert.deepEqual(decided('ExecutorRole', 's3:GetObject'), ['Allowed'])
  assert.deepEqual(decided('ApiRole', 's3:GetObject'), ['Allowed'])
  assert.deepEqual(decided('OperatorPolicy', 's3:GetObject'), ['Allowed'])
  assert.deepEqual(decided('OperatorPolicy', 's3:ListBucket'), ['Allowed'])
  assert.deepEqual(decided('OperatorPolicy', 's3:DeleteObject'), ['Allowed'])
  assert.deepEqual(decided('SchedulerRole', 's3:ListBucket'), ['Allowed'])
  assert.deepEqual(decided('SchedulerRole', 's3:DeleteObject'), ['Allowed'])
  const multipart = calls.filter((c) => c.role === 'ExecutorRole' && c.action === 's3:PutObject').map((c) => c.operation)
  assert.ok(multipart.includes('UploadPart') && multipart.includes('CompleteMultipartUpload'), multipart.join())
})

test('an S3 grant dropped or widened is named with its site; the prefix condition decides', async () => {
  const noRead = await templateWith(
    'Action: [s3:PutObject, s3:GetObject, s3:AbortMultipartUpload]',
    'Action: [s3:PutObject, s3:AbortMultipartUpload]',
  )
  const results = await evaluate(readCalls([S3_CALLS]), { root, template: noRead })
  assert.deepEqual(failures(results).map((r) => [r.role, r.action, r.decision]), [['ExecutorRole', 's3:GetObject', 'ImplicitlyDenied']])
  assert.match(report(results), /DENIED ExecutorRole s3:GetObject on arn:aws:s3:::rara-artifactsbucket\/runs\/\{run\}/)
  assert.match(report(results), /at shared\/runtime\/src\/executor\/offload\.rs:\d+/)

  const list = (prefix) => ({ role: 'OperatorPolicy', action: 's3:ListBucket', resource: 'GetAtt:ArtifactsBucket.Arn', site: 'x.rs:1', context: { 's3:prefix': prefix } })
  const listed = await evaluate([list('runs/{run}/'), list(''), list('other/')], { root })
  assert.deepEqual(listed.map((r) => [r.context['s3:prefix'], r.decision]).sort(), [
    ['', 'ImplicitlyDenied'], ['other/', 'ImplicitlyDenied'], ['runs/{run}/', 'Allowed'],
  ])
})

test("the bucket policy is the objects' resource policy: its deny wins", async () => {
  // The TLS-only deny without its condition denies every call, whatever the role grants.
  const denyAll = await templateWith(
    `            Resource: [!GetAtt ArtifactsBucket.Arn, !Sub "\${ArtifactsBucket.Arn}/*"]
            Condition:
              Bool:
                aws:SecureTransport: "false"`,
    '            Resource: [!GetAtt ArtifactsBucket.Arn, !Sub "${ArtifactsBucket.Arn}/*"]',
  )
  const results = await evaluate(readCalls([S3_CALLS]), { root, template: denyAll })
  const evaluated = results.filter((r) => r.decision !== 'not evaluated')
  assert.ok(evaluated.length >= 5)
  assert.ok(evaluated.every((r) => r.decision === 'ExplicitlyDenied'), evaluated.map((r) => r.decision).join())
})
