// Renders the identity policies a CloudFormation/SAM template gives each IAM principal:
// parses the template (short-form intrinsics included), resolves the intrinsics the
// policies use (Ref, GetAtt, Sub, If with the template's Conditions, Join, FindInMap,
// Select, Split, AWS::NoValue) with parameters at fixed test values, and returns each
// role's (or managed policy's) policy documents with literal ARNs.
import { readFileSync } from 'node:fs'
import { parse } from 'yaml'

export const ACCOUNT = '123456789012'
export const REGION = 'us-east-1'

/** Parameter values the check renders every template with (others take their Default). */
export const TEST_PARAMETERS = {
  DatabaseSecretArn: `arn:aws:secretsmanager:${REGION}:${ACCOUNT}:secret:rara/database-AbCdEf`,
  SecretsPrefix: 'rara/workflows/',
  RemoteCredentialsSecretArn: `arn:aws:secretsmanager:${REGION}:${ACCOUNT}:secret:rara/remote-AbCdEf`,
  EnableApi: 'true',
  // The executor service's artifact store (infra/executor-service.yaml).
  ArtifactsBucketName: 'rara-artifactsbucket',
}

const NO_VALUE = Symbol('AWS::NoValue')
const FUNCTIONS = ['Base64', 'Cidr', 'FindInMap', 'GetAtt', 'GetAZs', 'ImportValue', 'Join', 'Select', 'Split',
  'Sub', 'Transform', 'And', 'Equals', 'If', 'Not', 'Or', 'ToJsonString', 'Length']

function tags() {
  const wrap = (key) => (value) => {
    const plain = value && typeof value.toJSON === 'function' ? value.toJSON() : value
    if (key === 'Fn::GetAtt' && typeof plain === 'string') return { [key]: plain.split('.') }
    return { [key]: plain }
  }
  const out = []
  const names = [['Ref', 'Ref'], ['Condition', 'Condition'], ...FUNCTIONS.map((f) => [f, `Fn::${f}`])]
  for (const [tag, key] of names) {
    out.push({ tag: `!${tag}`, resolve: wrap(key) })
    out.push({ tag: `!${tag}`, collection: 'seq', resolve: wrap(key) })
    out.push({ tag: `!${tag}`, collection: 'map', resolve: wrap(key) })
  }
  return out
}

/** The template at `path`, parsed to its JSON form. */
export function loadTemplate(path) {
  return parseTemplate(readFileSync(path, 'utf8'))
}

export function parseTemplate(text) {
  return parse(text, { customTags: tags(), maxAliasCount: -1, merge: true })
}

/** A resolver of `template`'s intrinsics with `parameters` (over TEST_PARAMETERS and defaults). */
export function resolver(template, parameters = {}) {
  const resources = template.Resources ?? {}
  const params = { ...TEST_PARAMETERS, ...parameters }
  const pseudo = {
    'AWS::AccountId': ACCOUNT, 'AWS::Region': REGION, 'AWS::Partition': 'aws', 'AWS::StackName': 'rara',
    'AWS::URLSuffix': 'amazonaws.com', 'AWS::StackId': `arn:aws:cloudformation:${REGION}:${ACCOUNT}:stack/rara/1`,
  }
  const conditions = new Map()

  function parameter(name) {
    const declared = template.Parameters?.[name]
    if (!declared) return undefined
    const value = name in params ? params[name] : declared.Default
    if (value === undefined) throw new Error(`parameter ${name} has no default and no test value`)
    if (String(declared.Type).startsWith('CommaDelimitedList') || String(declared.Type).startsWith('List<')) {
      return Array.isArray(value) ? value : String(value).split(',')
    }
    return String(value)
  }

  function condition(name) {
    if (!conditions.has(name)) {
      const expression = template.Conditions?.[name]
      if (expression === undefined) throw new Error(`unknown condition ${name}`)
      conditions.set(name, Boolean(resolve(expression)))
    }
    return conditions.get(name)
  }

  function exists(id) {
    const resource = resources[id]
    return resource !== undefined && (resource.Condition === undefined || condition(resource.Condition))
  }

  function service(type) {
    return type.split('::')[1].toLowerCase()
  }

  function ref(name) {
    if (name === 'AWS::NoValue') return NO_VALUE
    if (name in pseudo) return pseudo[name]
    const p = parameter(name)
    if (p !== undefined) return p
    const resource = resources[name]
    if (!resource) throw new Error(`Ref to unknown ${name}`)
    switch (resource.Type) {
      case 'AWS::SQS::Queue': return `https://sqs.${REGION}.amazonaws.com/${ACCOUNT}/${name}`
      case 'AWS::SecretsManager::Secret':
        return `arn:aws:secretsmanager:${REGION}:${ACCOUNT}:secret:${resolve(resource.Properties?.Name ?? name)}-AbCdEf`
      case 'AWS::Logs::LogGroup': return resolve(resource.Properties?.LogGroupName ?? name)
      case 'AWS::IAM::ManagedPolicy': return `arn:aws:iam::${ACCOUNT}:policy/${name}`
      // A bucket's generated name is the stack's and the id's, lower case.
      case 'AWS::S3::Bucket': return resolve(resource.Properties?.BucketName ?? `rara-${name.toLowerCase()}`)
      default: return name
    }
  }

  function getAtt(id, attribute) {
    const resource = resources[id]
    if (!resource) throw new Error(`GetAtt of unknown ${id}`)
    const type = resource.Type
    if (type === 'AWS::SQS::Queue') {
      if (attribute === 'Arn') return `arn:aws:sqs:${REGION}:${ACCOUNT}:${id}`
      if (attribute === 'QueueName') return id
      if (attribute === 'QueueUrl') return ref(id)
    }
    if (type === 'AWS::Logs::LogGroup' && attribute === 'Arn') {
      return `arn:aws:logs:${REGION}:${ACCOUNT}:log-group:${ref(id)}:*`
    }
    if (type === 'AWS::IAM::Role' && attribute === 'Arn') return `arn:aws:iam::${ACCOUNT}:role/${id}`
    // S3 ARNs name neither region nor account.
    if (type === 'AWS::S3::Bucket' && attribute === 'Arn') return `arn:aws:s3:::${ref(id)}`
    if (attribute === 'Arn') {
      const kind = type.split('::')[2].toLowerCase()
      return `arn:aws:${service(type)}:${REGION}:${ACCOUNT}:${kind}/${id}`
    }
    return `${id}.${attribute}`
  }

  function sub(text, vars = {}) {
    return text.replace(/\$\{([^}]+)\}/g, (whole, name) => {
      if (name.startsWith('!')) return `\${${name.slice(1)}}`
      if (name in vars) return String(vars[name])
      if (name.includes('.') && !name.startsWith('AWS::')) {
        const [id, ...attribute] = name.split('.')
        return String(getAtt(id, attribute.join('.')))
      }
      return String(ref(name))
    })
  }

  function resolve(node) {
    if (Array.isArray(node)) return node.map(resolve).filter((v) => v !== NO_VALUE)
    if (node === null || typeof node !== 'object') return node
    const keys = Object.keys(node)
    if (keys.length === 1) {
      const [key] = keys
      const arg = node[key]
      switch (key) {
        case 'Ref': return ref(arg)
        case 'Condition': if (typeof arg === 'string') return condition(arg); break
        case 'Fn::GetAtt': {
          const [id, ...attribute] = Array.isArray(arg) ? arg : String(arg).split('.')
          return getAtt(id, attribute.join('.'))
        }
        case 'Fn::Sub': {
          if (typeof arg === 'string') return sub(arg)
          const vars = Object.fromEntries(Object.entries(arg[1] ?? {}).map(([k, v]) => [k, resolve(v)]))
          return sub(arg[0], vars)
        }
        case 'Fn::If': {
          const [name, yes, no] = arg
          return resolve(condition(name) ? yes : no)
        }
        case 'Fn::Equals': { const [a, b] = resolve(arg); return String(a) === String(b) }
        case 'Fn::Not': return !resolve(arg)[0]
        case 'Fn::And': return resolve(arg).every(Boolean)
        case 'Fn::Or': return resolve(arg).some(Boolean)
        case 'Fn::Join': { const [sep, list] = resolve(arg); return list.join(sep) }
        case 'Fn::Split': { const [sep, text] = resolve(arg); return text.split(sep) }
        case 'Fn::Select': { const [i, list] = resolve(arg); return list[Number(i)] }
        case 'Fn::FindInMap': {
          const [map, top, second] = resolve(arg)
          return template.Mappings[map][top][second]
        }
        default:
          if (key.startsWith('Fn::')) throw new Error(`${key} is not supported by the renderer`)
      }
    }
    const out = {}
    for (const [k, v] of Object.entries(node)) {
      const value = resolve(v)
      if (value !== NO_VALUE) out[k] = value
    }
    return out
  }

  return { resolve, exists, condition, resources }
}

/**
 * The identity policies of `principal` (a logical id): an AWS::IAM::Role's inline policies,
 * the template's managed policies it lists or that list it; or an AWS::IAM::ManagedPolicy /
 * AWS::IAM::Policy alone (for a principal outside the template, such as the operator).
 */
export function identityPolicies(template, principal, parameters = {}) {
  const r = resolver(template, parameters)
  const resource = r.resources[principal]
  if (!resource) throw new Error(`${principal} is not a resource of the template`)
  if (!r.exists(principal)) throw new Error(`${principal} is not created with the test parameters (Condition ${resource.Condition})`)
  const props = r.resolve(resource.Properties ?? {})
  if (resource.Type === 'AWS::IAM::ManagedPolicy' || resource.Type === 'AWS::IAM::Policy') {
    return [{ name: principal, policy: props.PolicyDocument }]
  }
  if (resource.Type !== 'AWS::IAM::Role') throw new Error(`${principal} is a ${resource.Type}, not a role or policy`)
  const policies = (props.Policies ?? []).map((p) => ({ name: p.PolicyName, policy: p.PolicyDocument }))
  const attached = new Set(props.ManagedPolicyArns ?? [])
  for (const [id, other] of Object.entries(r.resources)) {
    if (other.Type !== 'AWS::IAM::ManagedPolicy' && other.Type !== 'AWS::IAM::Policy') continue
    if (!r.exists(id)) continue
    const roles = r.resolve(other.Properties?.Roles ?? [])
    const arn = other.Type === 'AWS::IAM::ManagedPolicy' ? r.resolve({ Ref: id }) : null
    if (roles.includes(principal) || (arn && attached.has(arn))) {
      policies.push({ name: id, policy: r.resolve(other.Properties.PolicyDocument) })
      attached.delete(arn)
    }
  }
  for (const arn of attached) {
    throw new Error(`${principal} attaches ${arn}, a managed policy outside the template the check cannot read`)
  }
  return policies
}

/** A call's resource: a literal ARN, `GetAtt:Id.Attr`, `Ref:Name` or `Sub:text`, as an ARN. */
export function resourceArn(template, spec, parameters = {}) {
  const r = resolver(template, parameters)
  if (spec.startsWith('GetAtt:')) {
    const [id, ...attribute] = spec.slice('GetAtt:'.length).split('.')
    return r.resolve({ 'Fn::GetAtt': [id, attribute.join('.')] })
  }
  if (spec.startsWith('Ref:')) return r.resolve({ Ref: spec.slice('Ref:'.length) })
  if (spec.startsWith('Sub:')) return r.resolve({ 'Fn::Sub': spec.slice('Sub:'.length) })
  return spec
}

/**
 * The resource policy the template puts on `arn`, if any: an AWS::SQS::QueuePolicy listing
 * the queue, an AWS::S3::BucketPolicy of the bucket or of the object's bucket (say, a deny
 * without aws:SecureTransport), or null.
 */
export function resourcePolicy(template, arn, parameters = {}) {
  const r = resolver(template, parameters)
  for (const [id, resource] of Object.entries(r.resources)) {
    if (!r.exists(id)) continue
    if (resource.Type === 'AWS::SQS::QueuePolicy') {
      const props = r.resolve(resource.Properties ?? {})
      const arns = (props.Queues ?? []).map((url) => `arn:aws:sqs:${REGION}:${ACCOUNT}:${String(url).split('/').pop()}`)
      if (arns.includes(arn)) return props.PolicyDocument
    }
    if (resource.Type === 'AWS::S3::BucketPolicy') {
      const props = r.resolve(resource.Properties ?? {})
      const bucket = `arn:aws:s3:::${props.Bucket}`
      if (arn === bucket || arn.startsWith(`${bucket}/`)) return props.PolicyDocument
    }
  }
  return null
}
