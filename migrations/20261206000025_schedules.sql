-- Schedules (`rara schedule create`): a registered workflow run by the scheduler at each slot
-- of a calendar. The scheduler's maintenance fires the due slots (`schedule_due.sql`); a slot's
-- run has the idempotency key `schedule:<id>:<slot>`, so a slot is one run however many
-- schedulers, triggers or backfills make it.
CREATE TABLE schedules (
    id                uuid PRIMARY KEY,
    name              text NOT NULL,
    workflow          text NOT NULL,
    -- The pinned version; NULL: the newest version when a slot fires (`@latest`).
    workflow_version  integer,
    -- Exactly one of: a five-field cron read in `timezone`, or every so many milliseconds.
    cron              text,
    every_ms          bigint,
    timezone          text NOT NULL DEFAULT 'UTC',
    -- The run inputs; `{"$schedule": "/slot_time"}` is filled in with the slot's time.
    inputs            jsonb NOT NULL DEFAULT '{}',
    overlap           text NOT NULL DEFAULT 'skip',
    -- Slots older than this when they are looked at are missed, not fired.
    catchup_window_ms bigint NOT NULL,
    -- A slot fires up to this long after its time (the same delay for every scheduler).
    jitter_ms         bigint NOT NULL DEFAULT 0,
    paused            boolean NOT NULL DEFAULT false,
    -- The first slot not yet decided, and when it is due (the slot plus its jitter).
    next_slot_at      timestamptz NOT NULL,
    next_fire_at      timestamptz NOT NULL,
    -- `buffer_one`: the slot that waits for the previous run to end.
    buffered_slot_at  timestamptz,
    -- The schedule's latest run (what overlap looks at) and how its slots went.
    last_run_id       uuid,
    last_slot_at      timestamptz,
    last_error        text,
    slots_fired       bigint NOT NULL DEFAULT 0,
    slots_skipped     bigint NOT NULL DEFAULT 0,
    slots_missed      bigint NOT NULL DEFAULT 0,
    slots_failed      bigint NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT schedules_name_unique UNIQUE (name),
    CONSTRAINT schedules_name_not_empty CHECK (name <> ''),
    CONSTRAINT schedules_one_spec CHECK ((cron IS NULL) <> (every_ms IS NULL)),
    CONSTRAINT schedules_every_positive CHECK (every_ms IS NULL OR every_ms >= 1000),
    CONSTRAINT schedules_overlap_known CHECK (overlap IN ('skip', 'buffer_one', 'allow', 'cancel_previous')),
    CONSTRAINT schedules_bounds CHECK (catchup_window_ms >= 0 AND jitter_ms >= 0)
);

-- The scheduler's round: the due schedules, and those whose buffered slot may fire.
CREATE INDEX schedules_due ON schedules (next_fire_at) WHERE NOT paused;
CREATE INDEX schedules_buffered ON schedules (buffered_slot_at) WHERE buffered_slot_at IS NOT NULL AND NOT paused;

-- The schedule and slot a run was made for (NULL: not made by a schedule).
ALTER TABLE workflow_runs ADD COLUMN schedule_id uuid, ADD COLUMN schedule_slot timestamptz;
ALTER TABLE archived_workflow_runs ADD COLUMN schedule_id uuid, ADD COLUMN schedule_slot timestamptz;

ALTER TABLE schedules OWNER TO rara_owner;
GRANT SELECT, INSERT, UPDATE, DELETE ON schedules TO rara_runtime;
GRANT SELECT, INSERT, UPDATE, DELETE ON schedules TO rara_console;
