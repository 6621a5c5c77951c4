-- Flow control (DESIGN.md "Flow control"): concurrency keys with limits, fair share between
-- keys, priorities, rate limits and pauses, all enforced by the scheduler's one lease
-- statement (lease_due.sql). Additive: NULL columns and a constant default rewrite no rows.

-- The step's concurrency key (`concurrency: {key: ...}`, run inputs already filled in), and
-- the limit the definition gave it: at most that many steps of the key held (leased or
-- running, detached included) at once. NULL key: the step belongs to no key.
ALTER TABLE steps ADD COLUMN concurrency_key text;
ALTER TABLE steps ADD COLUMN concurrency_limit integer;
-- Higher first, within the fair share between keys.
ALTER TABLE steps ADD COLUMN priority integer NOT NULL DEFAULT 0;
ALTER TABLE steps ADD CONSTRAINT steps_concurrency_limit_positive CHECK (concurrency_limit IS NULL OR concurrency_limit > 0);
ALTER TABLE steps ADD CONSTRAINT steps_concurrency_limit_keyed CHECK (concurrency_limit IS NULL OR concurrency_key IS NOT NULL);

ALTER TABLE archived_steps ADD COLUMN concurrency_key text;
ALTER TABLE archived_steps ADD COLUMN concurrency_limit integer;
ALTER TABLE archived_steps ADD COLUMN priority integer NOT NULL DEFAULT 0;

-- The due index splits in two. Steps without a key: by priority, then oldest first (one
-- scan, as before). Steps with a key: per key, so the lease walks the keys with due steps one
-- index probe each and takes from every key in turn. Rows with a key are not in the first
-- index, nor rows without one in the second: neither scan skips the other's rows.
DROP INDEX steps_due;
CREATE INDEX steps_due ON steps (priority DESC, next_run_at)
    WHERE status = 'pending' AND pending_deps = 0 AND concurrency_key IS NULL;
CREATE INDEX steps_due_key ON steps (concurrency_key, priority DESC, next_run_at)
    WHERE status = 'pending' AND pending_deps = 0 AND concurrency_key IS NOT NULL;
-- What each key holds now (leased or running), counted from the steps themselves.
CREATE INDEX steps_held_key ON steps (concurrency_key)
    WHERE status IN ('leased', 'running') AND concurrency_key IS NOT NULL;

-- Operators' limits (`rara limits set`): per key, or per group of keys (a prefix ending in
-- `*`, e.g. `tenant-*`: one combined cap across every key it matches; a key belongs to the
-- group with the longest matching prefix). `max_held`: at most that many held at once.
-- `rate_count` per `rate_period_ms`: a token bucket, refilled continuously, holding at most
-- `rate_burst` tokens; one token per lease.
CREATE TABLE flow_limits (
    target          text PRIMARY KEY,
    max_held        integer,
    rate_count      integer,
    rate_period_ms  bigint,
    rate_burst      integer,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT flow_limits_target_not_empty CHECK (target <> '' AND target <> '*'),
    CONSTRAINT flow_limits_something CHECK (max_held IS NOT NULL OR rate_count IS NOT NULL),
    CONSTRAINT flow_limits_max_held_positive CHECK (max_held IS NULL OR max_held >= 0),
    CONSTRAINT flow_limits_rate_whole CHECK (
        (rate_count IS NULL) = (rate_period_ms IS NULL) AND (rate_count IS NULL) = (rate_burst IS NULL)),
    CONSTRAINT flow_limits_rate_positive CHECK (
        rate_count IS NULL OR (rate_count > 0 AND rate_period_ms > 0 AND rate_burst > 0))
);

-- One row per limited key or group, written by the lease that takes from it: `epoch` grows
-- at every such lease, and a lease only writes when the epoch is still the one it read, so
-- two schedulers racing on one key never both count the same free slots (the loser takes
-- nothing from that key this round). `tokens` and `refilled_at`: the rate limit's bucket.
CREATE TABLE flow_keys (
    name         text PRIMARY KEY,
    epoch        bigint NOT NULL,
    tokens       double precision NOT NULL,
    refilled_at  timestamptz NOT NULL
);

CREATE TYPE rara_pause_kind AS ENUM ('run', 'key', 'operation');

-- What is paused (`rara pause`): nothing new of it is leased; running attempts finish.
-- A key target ending in `*` pauses every key with that prefix.
CREATE TABLE flow_pauses (
    kind       rara_pause_kind NOT NULL,
    target     text NOT NULL,
    paused_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, target),
    CONSTRAINT flow_pauses_target_not_empty CHECK (target <> '')
);
