-- rara core schema: workflow runs, their steps, dependencies, attempt history, artifacts.
-- Forward-only. The `steps` table is the hot table; see DESIGN.md "Staying fast".

CREATE TYPE rara_run_status AS ENUM ('running', 'succeeded', 'failed', 'cancelled');

CREATE TYPE rara_step_status AS ENUM (
    'pending',    -- waiting for its dependencies or its next_run_at
    'leased',     -- leased by the scheduler; a message carrying lease_token is on the queue
    'running',    -- claimed by an executor (leased_by) under fence
    'succeeded',
    'failed',
    'cancelled',
    'skipped'     -- never ran: a dependency failed or was cancelled
);

CREATE TYPE rara_attempt_outcome AS ENUM ('running', 'succeeded', 'retrying', 'failed', 'cancelled', 'lease_expired');

-- Fences only grow: every claim takes the next value.
CREATE SEQUENCE rara_fence_seq AS bigint;

CREATE TABLE workflow_runs (
    id               uuid PRIMARY KEY,
    name             text NOT NULL,
    -- The same key returns the existing run instead of creating a second one.
    idempotency_key  text,
    status           rara_run_status NOT NULL DEFAULT 'running',
    -- Counters kept by the step transitions, so finishing a run never scans its steps.
    steps_total      integer NOT NULL,
    steps_unfinished integer NOT NULL,
    steps_failed     integer NOT NULL DEFAULT 0,
    steps_cancelled  integer NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    CONSTRAINT workflow_runs_name_not_empty CHECK (name <> ''),
    CONSTRAINT workflow_runs_counters_valid CHECK (
        steps_unfinished BETWEEN 0 AND steps_total AND steps_failed >= 0 AND steps_cancelled >= 0),
    CONSTRAINT workflow_runs_finished_when_terminal CHECK (
        (status = 'running') = (finished_at IS NULL))
);

CREATE UNIQUE INDEX workflow_runs_idempotency_key ON workflow_runs (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX workflow_runs_created_at ON workflow_runs (created_at DESC);

CREATE TABLE steps (
    id                  uuid PRIMARY KEY,
    run_id              uuid NOT NULL REFERENCES workflow_runs (id) ON DELETE CASCADE,
    name                text NOT NULL,
    -- Index of the step in its workflow definition (display order).
    position            integer NOT NULL,
    -- The executor name this step runs with (an in-process registration or a remote capability).
    operation           text NOT NULL,
    -- A pinned capability version, or NULL for any.
    version             text,
    -- The step's input; may hold secret references, never secret values.
    input               jsonb NOT NULL DEFAULT '{}',
    status              rara_step_status NOT NULL DEFAULT 'pending',
    -- How many dependencies have not succeeded yet: dueness is one indexed predicate.
    pending_deps        integer NOT NULL DEFAULT 0,
    next_run_at         timestamptz NOT NULL DEFAULT now(),
    -- Executions so far; counted at claim, not at lease.
    attempt             integer NOT NULL DEFAULT 0,
    max_attempts        integer NOT NULL,
    timeout_seconds     integer NOT NULL,
    retry_initial_delay_ms bigint NOT NULL,
    retry_max_delay_ms  bigint NOT NULL,
    retry_multiplier    double precision NOT NULL,
    -- Names one lease; travels in the SQS message. Only that message can claim the step.
    lease_token         uuid,
    -- The worker identity holding the lease (scheduler while leased, executor while running).
    leased_by           text,
    lease_expires_at    timestamptz,
    -- Issued from rara_fence_seq at every claim; every later write is conditional on it.
    fence               bigint,
    -- Last reported progress: {"fraction": 0.5, "message": "..."}.
    progress            jsonb,
    output              jsonb,
    -- Structured error of the last failed attempt: {"code","message","retryable","details"}.
    error               jsonb,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    finished_at         timestamptz,
    CONSTRAINT steps_name_unique_in_run UNIQUE (run_id, name),
    CONSTRAINT steps_attempts_valid CHECK (max_attempts >= 1 AND attempt BETWEEN 0 AND max_attempts),
    CONSTRAINT steps_pending_deps_valid CHECK (pending_deps >= 0),
    CONSTRAINT steps_timeout_positive CHECK (timeout_seconds > 0),
    CONSTRAINT steps_retry_valid CHECK (
        retry_initial_delay_ms >= 0 AND retry_max_delay_ms >= retry_initial_delay_ms AND retry_multiplier >= 1),
    CONSTRAINT steps_lease_when_held CHECK (
        (status IN ('leased', 'running')) =
        (lease_token IS NOT NULL AND leased_by IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CONSTRAINT steps_fence_when_running CHECK (status <> 'running' OR fence IS NOT NULL),
    CONSTRAINT steps_error_structured CHECK (
        error IS NULL OR (error ? 'code' AND error ? 'message' AND error ? 'retryable'))
);

-- The scheduler's one predicate: due steps, oldest first. Finished rows are not in it.
CREATE INDEX steps_due ON steps (next_run_at) WHERE status = 'pending' AND pending_deps = 0;
-- The reaper's predicate: held leases by expiry.
CREATE INDEX steps_held_lease_expiry ON steps (lease_expires_at) WHERE status IN ('leased', 'running');
CREATE INDEX steps_run_id ON steps (run_id);

-- The hot table: updated several times per step. Leave room for HOT updates and vacuum
-- early, so dead tuples never pile up under the claim and the due index.
ALTER TABLE steps SET (
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.05,
    autovacuum_vacuum_cost_delay = 0
);

CREATE TABLE step_dependencies (
    step_id     uuid NOT NULL REFERENCES steps (id) ON DELETE CASCADE,
    depends_on  uuid NOT NULL REFERENCES steps (id) ON DELETE CASCADE,
    PRIMARY KEY (step_id, depends_on),
    CONSTRAINT step_dependencies_not_self CHECK (step_id <> depends_on)
);
-- Releasing dependents looks up by the finished step.
CREATE INDEX step_dependencies_depends_on ON step_dependencies (depends_on);

-- Every execution of a step: who held it, under which fence, when, and how it ended.
CREATE TABLE step_attempts (
    step_id      uuid NOT NULL REFERENCES steps (id) ON DELETE CASCADE,
    attempt      integer NOT NULL,
    fence        bigint NOT NULL,
    leased_by    text NOT NULL,
    lease_token  uuid NOT NULL,
    outcome      rara_attempt_outcome NOT NULL DEFAULT 'running',
    error        jsonb,
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    -- When a retrying attempt's successor was due (now + the jittered retry delay).
    retry_at     timestamptz,
    PRIMARY KEY (step_id, attempt),
    CONSTRAINT step_attempts_attempt_positive CHECK (attempt >= 1),
    CONSTRAINT step_attempts_finished_when_done CHECK ((outcome = 'running') = (finished_at IS NULL)),
    CONSTRAINT step_attempts_error_structured CHECK (
        error IS NULL OR (error ? 'code' AND error ? 'message' AND error ? 'retryable'))
);

CREATE TABLE artifacts (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    step_id     uuid NOT NULL REFERENCES steps (id) ON DELETE CASCADE,
    attempt     integer NOT NULL,
    fence       bigint NOT NULL,
    name        text NOT NULL,
    uri         text NOT NULL,
    media_type  text,
    size_bytes  bigint,
    -- e.g. "sha256:<hex>"
    digest      text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT artifacts_name_not_empty CHECK (name <> ''),
    CONSTRAINT artifacts_size_not_negative CHECK (size_bytes IS NULL OR size_bytes >= 0)
);
CREATE INDEX artifacts_step_id ON artifacts (step_id);
