-- Durable waits (docs/src/guide/waits.md, DESIGN.md "Waits, schedules and composition").
--
-- A step with `wait` (its spec as planned, `steps.wait`) is never leased: the due indexes
-- leave it out, and the scheduler starts it instead (`wait_start.sql`: pending → waiting, a new
-- attempt and fence, a row in `waits`). While it waits, nothing runs and nothing is queued; its
-- row in `waits` is all there is, outside the lease statement's indexes.
--
-- Completing a wait is decided once: the first conditional write of `waits.completion` (the
-- step still `waiting`, the same attempt, no completion yet) wins, whoever makes it (a signal, an
-- event, a completion token, the timer, the timeout). The decision is applied to the step in
-- the same transaction, or, while the run is paused, by the scheduler once it is resumed.
ALTER TABLE steps ADD COLUMN wait jsonb;
ALTER TABLE archived_steps ADD COLUMN wait jsonb;

DROP INDEX steps_due;
CREATE INDEX steps_due ON steps (priority DESC, next_run_at)
    WHERE status = 'pending' AND pending_deps = 0 AND concurrency_key IS NULL AND wait IS NULL;
DROP INDEX steps_due_key;
CREATE INDEX steps_due_key ON steps (concurrency_key, priority DESC, next_run_at)
    WHERE status = 'pending' AND pending_deps = 0 AND concurrency_key IS NOT NULL AND wait IS NULL;
-- The waits the scheduler starts: due, and waiting for nothing but to begin.
CREATE INDEX steps_wait_ready ON steps (next_run_at)
    WHERE status = 'pending' AND pending_deps = 0 AND wait IS NOT NULL;

-- One row per waiting step (its current attempt). `due_at`: when a timer completes, or when a
-- signal or event wait times out (NULL: never). `token`: the completion token, the credential
-- of `POST /api/waits/{token}` (never served to anonymous readers). `completion`: what
-- completed it, once decided: {"by": "...", "output": ...} or {"by": "...", "error": {...}}.
CREATE TABLE waits (
    step_id      uuid PRIMARY KEY REFERENCES steps (id) ON DELETE CASCADE,
    run_id       uuid NOT NULL,
    attempt      integer NOT NULL,
    kind         text NOT NULL,
    name         text,
    key          text,
    due_at       timestamptz,
    token        text NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    completion   jsonb,
    completed_at timestamptz,
    CONSTRAINT waits_kind_known CHECK (kind IN ('timer', 'signal', 'event')),
    CONSTRAINT waits_named CHECK ((kind = 'timer') = (name IS NULL)),
    CONSTRAINT waits_completion_shape CHECK (
        completion IS NULL OR (completion ? 'by' AND (completion ? 'output' OR completion ? 'error'))),
    CONSTRAINT waits_completed_when_decided CHECK ((completion IS NULL) = (completed_at IS NULL))
);
CREATE UNIQUE INDEX waits_token ON waits (token);
-- The timers and timeouts the scheduler decides, by when they are due.
CREATE INDEX waits_due ON waits (due_at) WHERE completion IS NULL AND due_at IS NOT NULL;
-- What a signal or an event looks for.
CREATE INDEX waits_signal ON waits (run_id, name) WHERE kind = 'signal' AND completion IS NULL;
CREATE INDEX waits_event ON waits (name, key) WHERE kind = 'event' AND completion IS NULL;
-- Decided but not applied (the run was paused).
CREATE INDEX waits_decided ON waits (completed_at) WHERE completion IS NOT NULL;

-- Every signal a run received (`rara signal`): one row per (run, name, id), so the same id
-- twice is one delivery. `step_id`: the step it completed; NULL while it is kept for a step
-- that has not begun waiting (the wait accepts early signals). `reject`: the reason given by
-- `--reject` (the step fails with SIGNAL_REJECTED).
CREATE TABLE signals (
    run_id       uuid NOT NULL REFERENCES workflow_runs (id) ON DELETE CASCADE,
    name         text NOT NULL,
    id           text NOT NULL,
    payload      jsonb NOT NULL DEFAULT '{}',
    reject       text,
    step_id      uuid,
    received_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, name, id)
);
CREATE INDEX signals_kept ON signals (run_id, name, received_at) WHERE step_id IS NULL;

-- Every event received (`rara event send`, `POST /api/events`), kept for the retention
-- (RARA_EVENT_RETENTION_SECONDS): a wait that begins sees the newest event of its name and key
-- received since its run was created. The id makes a send idempotent.
CREATE TABLE events (
    name         text NOT NULL,
    id           text NOT NULL,
    key          text NOT NULL,
    payload      jsonb NOT NULL DEFAULT '{}',
    received_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, id)
);
CREATE INDEX events_by_key ON events (name, key, received_at DESC);
CREATE INDEX events_received_at ON events (received_at);
-- The waits started in the last minute that nothing decided yet: wait_match.sql looks for a
-- signal kept for them or an event that came while they were starting.
CREATE INDEX waits_started ON waits (started_at) WHERE completion IS NULL AND kind IN ('signal', 'event');

-- What a completion records (waits.completion), one shape for every statement that decides one.
-- A signal: its payload as the step's output, or, rejected, the error SIGNAL_REJECTED.
CREATE FUNCTION rara_signal_completion(signal_id text, payload jsonb, reject text) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN reject IS NULL
        THEN jsonb_build_object('by', 'signal ' || signal_id, 'output', payload)
        ELSE jsonb_build_object('by', 'signal ' || signal_id, 'error', jsonb_build_object(
            'code', 'SIGNAL_REJECTED', 'message', reject, 'retryable', false,
            'details', jsonb_build_object('signal_id', signal_id))) END
$$;
-- An event: its payload as the step's output.
CREATE FUNCTION rara_event_completion(event_id text, payload jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('by', 'event ' || event_id, 'output', payload)
$$;

-- The roles (migration 000021, docs/src/internals/schema.md "Roles"): the owner owns what this
-- adds. The scheduler (runtime) starts, decides, applies and forgets waits, takes kept signals,
-- prunes events, and may receive them too; the API and console (console) deliver signals,
-- events and completion tokens: they decide a wait and apply it in the same transaction.
ALTER TABLE waits OWNER TO rara_owner;
ALTER TABLE signals OWNER TO rara_owner;
ALTER TABLE events OWNER TO rara_owner;
ALTER FUNCTION rara_signal_completion(text, jsonb, text) OWNER TO rara_owner;
ALTER FUNCTION rara_event_completion(text, jsonb) OWNER TO rara_owner;
GRANT EXECUTE ON FUNCTION rara_signal_completion(text, jsonb, text), rara_event_completion(text, jsonb)
    TO rara_runtime, rara_console;
GRANT SELECT, INSERT, UPDATE, DELETE ON waits, events TO rara_runtime;
GRANT SELECT, INSERT, UPDATE ON signals TO rara_runtime;
GRANT SELECT, UPDATE ON waits TO rara_console;
GRANT SELECT, INSERT, UPDATE ON signals TO rara_console;
GRANT SELECT, INSERT ON events TO rara_console;
