// A rara.v1 remote executor written from proto/rara/v1/executor.proto alone (an outsider's
// view: no code of rara's Python executor), serving the four conformance capabilities.
//
//   RARA_EXECUTOR_TOKENS=tok1[,tok2] node server.js [PORT]   # prints "listening on HOST:PORT"
//
// Rules it keeps, as the proto states them: calls without `authorization: Bearer <token>`
// get UNAUTHENTICATED before any handler runs (health stays open); each attempt keeps the
// `attempt_secret` its Execute declared and Cancel must present it (PERMISSION_DENIED); it
// never supersedes, so no Execute stops another attempt; nothing here is detachable, so
// Attach is UNIMPLEMENTED. rara's conformance suite runs against it in
// shared/conformance/tests/conformance.rs.
'use strict';

const crypto = require('node:crypto');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');

const ROOT = path.join(__dirname, '..', '..', 'proto');
const options = { keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true };
const rara = grpc.loadPackageDefinition(loader.loadSync(path.join(ROOT, 'rara/v1/executor.proto'), { ...options, includeDirs: [ROOT] })).rara.v1;
const health = grpc.loadPackageDefinition(loader.loadSync(path.join(__dirname, 'health.proto'), options)).grpc.health.v1;

const VERSION = '1.0.0';
const CAPABILITIES = [
  ['conformance.echo', 'echoes its input'],
  ['conformance.sleep', 'sleeps'],
  ['conformance.fail', 'fails as told'],
  ['conformance.chatty', 'reports progress until stopped'],
].map(([name, description]) => ({ name, version: VERSION, description, detachable: false }));

const tokens = (process.env.RARA_EXECUTOR_TOKENS || '').split(',').map((t) => t.trim()).filter(Boolean);
if (tokens.length === 0) {
  console.error('set RARA_EXECUTOR_TOKENS (comma-separated bearer tokens)');
  process.exit(2);
}

/** Equality in time that does not depend on where the inputs differ. */
function same(a, b) {
  const x = crypto.createHash('sha256').update(a).digest();
  const y = crypto.createHash('sha256').update(b).digest();
  return crypto.timingSafeEqual(x, y) && a.length === b.length;
}

function authenticated(call) {
  const header = call.metadata.get('authorization')[0];
  const presented = typeof header === 'string' && header.startsWith('Bearer ') ? header.slice(7) : null;
  let ok = false;
  for (const token of tokens) ok = (presented !== null && same(presented, token)) || ok;
  return ok;
}

/** Wraps a handler: an unauthenticated call is refused before it runs. */
function guarded(handler, streaming) {
  return (call, callback) => {
    if (authenticated(call)) return handler(call, callback);
    console.error(`unauthenticated call refused method=${call.getPath ? call.getPath() : '?'}`);
    const status = { code: grpc.status.UNAUTHENTICATED, details: 'a valid bearer token is required' };
    return streaming ? call.emit('error', status) : callback(status);
  };
}

const attempts = new Map(); // "step/attempt" -> { stop(reason), secret }

function now() {
  const ms = Date.now();
  return { seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1e6 };
}

function execute(call) {
  const req = call.request;
  let sequence = 0;
  let ended = false;
  const send = (event) => {
    if (ended || call.cancelled) return false;
    sequence += 1;
    call.write({ sequence, timestamp: now(), ...event });
    return true;
  };
  const end = (event) => {
    send(event);
    ended = true;
    clearInterval(beats);
    clearTimeout(deadlineTimer);
    clearInterval(work);
    clearTimeout(finish);
    attempts.delete(key);
    call.end();
  };
  const fail = (code, message, retryable, details = {}) => end({ failed: { error: { code, message, retryable, details } } });

  const key = `${req.step_id}/${req.attempt}`;
  let work = null;
  let finish = null;
  let deadlineTimer = null;
  const beats = req.heartbeat_interval_ms > 0
    ? setInterval(() => { if (!ended && !call.cancelled) call.write({ sequence: 0, timestamp: now(), heartbeat: {} }); }, req.heartbeat_interval_ms)
    : null;

  send({ accepted: {} });
  const offered = CAPABILITIES.find((c) => c.name === req.operation);
  const pinnedOk = req.capability_version === '' || req.capability_version === VERSION;
  let input;
  try { input = req.input_json.trim() === '' ? {} : JSON.parse(req.input_json); } catch { input = null; }
  const deadlineMs = req.deadline ? Number(req.deadline.seconds) * 1000 + Math.floor(req.deadline.nanos / 1e6) : null;

  if (!offered || !pinnedOk) {
    send({ running: { capability_version: '' } });
    return fail('UNKNOWN_OPERATION', `not offered: ${req.operation} ${req.capability_version}`, false);
  }
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    send({ running: { capability_version: '' } });
    return fail('INVALID_INPUT', 'input_json must be a JSON object', false);
  }
  if (deadlineMs !== null && deadlineMs <= Date.now()) {
    send({ running: { capability_version: '' } });
    return fail('DEADLINE_EXCEEDED', 'the deadline has passed', true);
  }
  if (attempts.has(key)) {
    send({ running: { capability_version: '' } });
    return fail('ALREADY_RUNNING', 'this attempt runs here', true);
  }
  attempts.set(key, { secret: req.attempt_secret, stop: (reason) => end({ cancelled: { reason } }) });
  call.on('cancelled', () => { ended = true; clearInterval(beats); clearInterval(work); clearTimeout(finish); clearTimeout(deadlineTimer); attempts.delete(key); });
  if (deadlineMs !== null) {
    deadlineTimer = setTimeout(() => fail('DEADLINE_EXCEEDED', 'the deadline passed mid-step', true), deadlineMs - Date.now());
  }
  send({ running: { capability_version: VERSION } });

  switch (req.operation) {
    case 'conformance.echo': {
      send({ progress: { fraction: 0.5, message: 'echoing' } });
      const body = Buffer.from(JSON.stringify(input));
      const artifact = {
        name: 'echo.json', uri: 'memory://echo.json', media_type: 'application/json',
        size_bytes: body.length, digest: `sha256:${crypto.createHash('sha256').update(body).digest('hex')}`,
      };
      send({ artifact });
      return end({ succeeded: { output_json: JSON.stringify({ echo: input }), artifacts: [artifact] } });
    }
    case 'conformance.sleep': {
      const seconds = Number(input.seconds || 0);
      const started = Date.now();
      send({ progress: { fraction: 0, message: 'sleeping' } });
      work = setInterval(() => send({ progress: { fraction: Math.min(1, (Date.now() - started) / (seconds * 1000 || 1)), message: 'sleeping' } }), 200);
      finish = setTimeout(() => end({ succeeded: { output_json: JSON.stringify({ slept_seconds: seconds }), artifacts: [] } }), seconds * 1000);
      return undefined;
    }
    case 'conformance.fail':
      return fail(String(input.code), String(input.message), Boolean(input.retryable), input.details || {});
    default: // conformance.chatty
      work = setInterval(() => send({ progress: { fraction: 0.5, message: 'chatty' } }), 5);
      return undefined;
  }
}

function cancel(call, callback) {
  const req = call.request;
  const attempt = attempts.get(`${req.step_id}/${req.attempt}`);
  if (attempt && !same(req.attempt_secret, attempt.secret)) {
    return callback({ code: grpc.status.PERMISSION_DENIED, details: "attempt_secret is not this attempt's secret" });
  }
  if (attempt) attempt.stop(req.reason || 'cancel requested');
  return callback(null, { found: Boolean(attempt) });
}

const server = new grpc.Server();
server.addService(rara.ExecutorService.service, {
  GetCapabilities: guarded((_call, callback) => callback(null, { capabilities: CAPABILITIES }), false),
  Execute: guarded(execute, true),
  Cancel: guarded(cancel, false),
  Attach: guarded((call) => call.emit('error', { code: grpc.status.UNIMPLEMENTED, details: 'nothing here is detachable' }), true),
});
server.addService(health.Health.service, {
  Check: (_call, callback) => callback(null, { status: 'SERVING' }),
  Watch: (call) => call.emit('error', { code: grpc.status.UNIMPLEMENTED, details: 'Check only' }),
});
server.bindAsync(`127.0.0.1:${process.argv[2] || 0}`, grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) throw err;
  console.log(`listening on 127.0.0.1:${port}`);
});
