-- The scheduler's lease (DESIGN.md "Flow control"): up to $1 due steps for the holder $2, in
-- one statement, which also returns what their messages carry. $3 (ms) is the delivery
-- timeout: how long the message may take to be claimed before the reaper leases the step
-- again (RARA_DELIVERY_TIMEOUT_SECONDS). $4 is the time to lease at (NULL: now(); tests pass
-- a clock). $5 is the most keys one round considers, $6 the key the previous round's window
-- ended at (NULL: none).
--
-- Steps without a concurrency key come from the partial index steps_due, highest priority
-- first, then oldest (`make explain`). Steps with a key come from steps_due_key, a few per
-- key: the keys with due steps are walked one index probe each, so a key with 100,000 due
-- steps costs what a key with 10 does. A round considers at most $5 keys (authors choose
-- keys, and a flood of distinct ones must not slow the round for everyone): the window of
-- keys after $6 in key order, wrapping round to the first key. A key beyond the window waits
-- for a later round, it does not fail; the next round's window starts where this one ended
-- (or, when the batch filled first, after the last key it took from), so every key with due
-- steps is considered within (keys / $5) rounds and none is starved.
-- Each row returned carries `window_end`, and one row with no step is returned when nothing
-- is leased. Each round takes from every key in turn (the first
-- due step of each key, then the second, ...; the steps without a key count as one key),
-- highest priority first within a key and across keys at the same turn; no key gets more
-- than its share of the batch ($1 over the number of keys, rounded up).
--
-- A key takes no more than its room: the smallest of its limits less what it holds (held =
-- leased + running, detached included, counted from the steps themselves), the limit of its
-- group (`tenant-*`, combined over the group's keys), the step's own `concurrency.limit`, and
-- the whole tokens of its rate buckets. Every key (and group) it takes from has its row in
-- flow_keys written with the epoch it read plus one, and only if that epoch is still there
-- (an upsert re-checks the newest row): a scheduler that raced another one on a key, whose
-- snapshot misses the other's leases, writes nothing and leases nothing of that key this
-- round. Paused runs, operations and keys are not leased; a paused key is never scanned.
WITH RECURSIVE clock AS (
    SELECT coalesce($4::timestamptz, now()) AS now
),
pauses AS (
    SELECT coalesce(array_agg(target::uuid) FILTER (WHERE kind = 'run'), '{}') AS runs,
           coalesce(array_agg(target) FILTER (WHERE kind = 'operation'), '{}') AS operations,
           coalesce(array_agg(target) FILTER (WHERE kind = 'key'), '{}') AS keys
    FROM flow_pauses
),
-- The window: up to $5 keys with due steps after $6, one index probe each (a loose index scan
-- of steps_due_key), then from the first key up to $6 if the window is not full.
after(key, n) AS (
    (SELECT s.concurrency_key, 1::bigint FROM steps s
     WHERE s.status = 'pending' AND s.pending_deps = 0 AND s.wait IS NULL AND s.concurrency_key IS NOT NULL
       AND s.concurrency_key > coalesce($6::text, '')
     ORDER BY s.concurrency_key LIMIT 1)
    UNION ALL
    SELECT (SELECT s.concurrency_key FROM steps s
            WHERE s.status = 'pending' AND s.pending_deps = 0 AND s.wait IS NULL AND s.concurrency_key IS NOT NULL
              AND s.concurrency_key > a.key
            ORDER BY s.concurrency_key LIMIT 1), a.n + 1
    FROM after a WHERE a.key IS NOT NULL AND a.n < $5::bigint
),
wrapped(key, n) AS (
    (SELECT s.concurrency_key, (SELECT count(a.key) FROM after a) + 1 FROM steps s
     WHERE s.status = 'pending' AND s.pending_deps = 0 AND s.wait IS NULL AND s.concurrency_key IS NOT NULL
       AND s.concurrency_key <= $6::text AND (SELECT count(a.key) FROM after a) < $5::bigint
     ORDER BY s.concurrency_key LIMIT 1)
    UNION ALL
    SELECT (SELECT s.concurrency_key FROM steps s
            WHERE s.status = 'pending' AND s.pending_deps = 0 AND s.wait IS NULL AND s.concurrency_key IS NOT NULL
              AND s.concurrency_key > w.key AND s.concurrency_key <= $6::text
            ORDER BY s.concurrency_key LIMIT 1), w.n + 1
    FROM wrapped w WHERE w.key IS NOT NULL AND w.n < $5::bigint
),
keys AS (
    SELECT key, n FROM after WHERE key IS NOT NULL
    UNION ALL
    SELECT key, n FROM wrapped WHERE key IS NOT NULL
),
-- What each key holds now.
held AS (
    SELECT s.concurrency_key AS key, count(*) AS n FROM steps s
    WHERE s.status IN ('leased', 'running') AND s.concurrency_key IS NOT NULL
    GROUP BY s.concurrency_key
),
-- Each unpaused key with due steps, its own limits and its group (the longest prefix).
live AS (
    SELECT k.key, k.n, own.target AS own, g.target AS grp
    FROM keys k
    CROSS JOIN pauses pa
    LEFT JOIN flow_limits own ON own.target = k.key
    LEFT JOIN LATERAL (
        SELECT l.target FROM flow_limits l
        WHERE right(l.target, 1) = '*' AND starts_with(k.key, left(l.target, -1))
        ORDER BY length(l.target) DESC LIMIT 1
    ) g ON true
    WHERE k.key IS NOT NULL
      AND NOT EXISTS (
          SELECT 1 FROM unnest(pa.keys) p(target)
          WHERE p.target = k.key OR (right(p.target, 1) = '*' AND starts_with(k.key, left(p.target, -1))))
),
-- Each key's fair share of the batch (the steps without a key, if any are due, count as one
-- more key): no more of a key's steps are read and locked than one round can give it.
share AS (
    SELECT ($1::bigint + l.keys - 1) / l.keys AS n
    FROM (SELECT count(*) + (SELECT count(*) FROM (
              SELECT 1 FROM steps s
              WHERE s.status = 'pending' AND s.pending_deps = 0 AND s.wait IS NULL AND s.concurrency_key IS NULL
              ORDER BY s.priority DESC, s.next_run_at LIMIT 1) p)
              AS keys
          FROM live) l
    WHERE l.keys > 0
),
-- The buckets taken from: each key, and each group; the room each leaves.
buckets AS (
    SELECT b.name, b.is_group, f.epoch,
           least(coalesce(l.max_held - b.held, $1::bigint),
                 CASE WHEN l.rate_count IS NULL THEN $1::bigint ELSE floor(b.tokens)::bigint END) AS room,
           b.tokens
    FROM (
        SELECT n.name, n.is_group,
               coalesce(CASE WHEN n.is_group
                        THEN (SELECT sum(h.n)::bigint FROM held h WHERE starts_with(h.key, left(n.name, -1)))
                        ELSE (SELECT h.n FROM held h WHERE h.key = n.name) END, 0) AS held,
               CASE WHEN r.rate_count IS NOT NULL THEN
                   least(r.rate_burst::float8,
                         coalesce(fk.tokens + greatest(extract(epoch FROM c.now - fk.refilled_at), 0)
                                  * 1000.0 * r.rate_count / r.rate_period_ms, r.rate_burst))
               END AS tokens
        FROM (SELECT key AS name, false AS is_group FROM live
              UNION SELECT grp, true FROM live WHERE grp IS NOT NULL) n
        CROSS JOIN clock c
        LEFT JOIN flow_limits r ON r.target = n.name
        LEFT JOIN flow_keys fk ON fk.name = n.name
    ) b
    LEFT JOIN flow_limits l ON l.target = b.name
    LEFT JOIN flow_keys f ON f.name = b.name
),
-- Up to its room and its share of each key's due steps, highest priority first, then oldest.
keyed AS (
    SELECT d.id, d.key, lv.n, lv.grp, d.priority, d.next_run_at, d.concurrency_limit,
           coalesce((SELECT h.n FROM held h WHERE h.key = d.key), 0) AS held
    FROM live lv
    JOIN buckets kb ON kb.name = lv.key AND NOT kb.is_group
    CROSS JOIN clock c
    CROSS JOIN pauses pa
    CROSS JOIN LATERAL (
        SELECT s.id, s.concurrency_key AS key, s.priority, s.next_run_at, s.concurrency_limit
        FROM steps s
        WHERE s.status = 'pending' AND s.pending_deps = 0 AND s.wait IS NULL AND s.concurrency_key = lv.key
          AND s.next_run_at <= c.now
          AND s.run_id <> ALL (pa.runs) AND s.operation <> ALL (pa.operations)
        ORDER BY s.priority DESC, s.next_run_at
        LIMIT greatest(least(kb.room, (SELECT sh.n FROM share sh),
                             coalesce((SELECT gb.room FROM buckets gb WHERE gb.name = lv.grp AND gb.is_group), $1::bigint)),
                       0)
        FOR UPDATE SKIP LOCKED
    ) d
),
-- The steps without a key: one more key, without limits.
plain AS (
    SELECT s.id, s.priority, s.next_run_at
    FROM steps s, clock c, pauses pa
    WHERE s.status = 'pending' AND s.pending_deps = 0 AND s.wait IS NULL AND s.concurrency_key IS NULL
      AND s.next_run_at <= c.now
      AND s.run_id <> ALL (pa.runs) AND s.operation <> ALL (pa.operations)
    ORDER BY s.priority DESC, s.next_run_at
    LIMIT $1::bigint
    FOR UPDATE SKIP LOCKED
),
-- Each key's turn for each step; a step over its own limit is left.
turns AS (
    SELECT k.*, row_number() OVER (PARTITION BY k.key ORDER BY k.priority DESC, k.next_run_at) AS turn
    FROM keyed k
),
allowed AS (
    SELECT t.id, t.key, t.n, t.grp, t.priority, t.next_run_at, t.turn
    FROM turns t
    WHERE t.held + t.turn <= coalesce(t.concurrency_limit, 2147483647)
),
-- A group's keys share its room, turn by turn.
grouped AS (
    SELECT a.*, row_number() OVER (PARTITION BY a.grp ORDER BY a.turn, a.priority DESC, a.next_run_at) AS in_group
    FROM allowed a
),
-- Ties go to the key earlier in the window (the steps without a key first), so that a round
-- whose batch fills takes from the window's keys in order.
chosen AS (
    SELECT g.id, g.key, g.n, g.grp FROM (
        SELECT g.id, g.key, g.n, g.grp, g.turn, g.priority, g.next_run_at FROM grouped g
        LEFT JOIN buckets gb ON gb.name = g.grp AND gb.is_group
        WHERE g.grp IS NULL OR g.in_group <= gb.room
        UNION ALL
        SELECT p.id, NULL, 0, NULL, row_number() OVER (ORDER BY p.priority DESC, p.next_run_at), p.priority,
               p.next_run_at
        FROM plain p
    ) g
    ORDER BY g.turn, g.priority DESC, g.next_run_at, g.n
    LIMIT $1::bigint
),
-- The buckets written: the epoch read plus one, only if it is still the epoch read.
taken AS (
    SELECT b.name, coalesce(b.epoch, 0) + 1 AS epoch, coalesce(b.tokens - n.taken, 0) AS tokens
    FROM (SELECT c.key AS name, count(*) AS taken FROM chosen c WHERE c.key IS NOT NULL GROUP BY c.key
          UNION ALL
          SELECT c.grp, count(*) FROM chosen c WHERE c.grp IS NOT NULL GROUP BY c.grp) n
    JOIN buckets b ON b.name = n.name
),
written AS (
    INSERT INTO flow_keys AS f (name, epoch, tokens, refilled_at)
    SELECT t.name, t.epoch, t.tokens, c.now FROM taken t CROSS JOIN clock c
    ON CONFLICT (name) DO UPDATE
    SET epoch = excluded.epoch, tokens = excluded.tokens, refilled_at = excluded.refilled_at
    WHERE f.epoch = excluded.epoch - 1
    RETURNING f.name
),
leased AS (
    UPDATE steps s
    SET status = 'leased', leased_by = $2::text, lease_token = gen_random_uuid(),
        lease_expires_at = c.now + $3::bigint * interval '1 millisecond', updated_at = now()
    FROM chosen ch, clock c
    WHERE s.id = ch.id
      AND (ch.key IS NULL OR ch.key IN (SELECT w.name FROM written w))
      AND (ch.grp IS NULL OR ch.grp IN (SELECT w.name FROM written w))
    RETURNING s.id, s.run_id, s.lease_token, s.operation,
              CASE WHEN s.remote_endpoint IS NULL THEN s.attempt + 1 ELSE s.attempt END AS attempt
)
-- Each leased step with what its message and spans carry (DESIGN.md "Tracing"): the attempt
-- the claim will run (the next one, or the same one when it re-attaches to a detached attempt:
-- claim.sql) and its run's trace context, one probe of the run's primary key per step (a
-- subquery, so that no plan reads the runs otherwise); and on every row, where the next
-- round's window starts (a row without a step when nothing was leased): after the last key of
-- this window, or, when the batch filled, after the last key it took from (the keys after it
-- are the next round's first; with no key taken, where this round started).
SELECT l.id AS step_id, l.run_id, l.lease_token, l.operation, l.attempt,
       (SELECT r.trace_context FROM workflow_runs r WHERE r.id = l.run_id) AS trace_context, w.window_end
FROM (SELECT CASE WHEN (SELECT count(*) FROM chosen) >= $1::bigint
                  THEN coalesce((SELECT c.key FROM chosen c WHERE c.key IS NOT NULL ORDER BY c.n DESC LIMIT 1), $6::text)
                  ELSE (SELECT k.key FROM keys k ORDER BY k.n DESC LIMIT 1) END AS window_end) w
LEFT JOIN leased l ON true
