-- Long steps (DESIGN.md "Long steps"): a remote attempt may outlive the invocation that
-- started it. The executor *parks* it (the step goes back to `leased` under the same lease
-- token, keeping its attempt and its fence) and a later claim *re-attaches* to it.

-- The endpoint that runs the step's current attempt detached, or NULL when the attempt (if
-- any) is not detachable or not parked yet. While set, a claim of the step re-attaches to
-- that attempt (same attempt, same fence) instead of starting a new one; a retry, a
-- give-back and a new attempt clear it.
ALTER TABLE steps ADD COLUMN remote_endpoint text;
-- The last event sequence of that attempt rara recorded: re-attaching resumes after it.
ALTER TABLE steps ADD COLUMN remote_sequence bigint;
ALTER TABLE steps ADD CONSTRAINT steps_remote_attempt_whole CHECK (
    (remote_endpoint IS NULL) = (remote_sequence IS NULL) AND (remote_sequence IS NULL OR remote_sequence >= 0));

-- Each stretch of an attempt during which an executor was attached to it and then let it
-- go: [{"by": worker, "from": t, "to": t, "sequence": n}]. The last stretch (to the
-- outcome) is implied by `finished_at`.
ALTER TABLE step_attempts ADD COLUMN detached_spans jsonb NOT NULL DEFAULT '[]';
-- The endpoint the attempt ran on when it was detached at least once.
ALTER TABLE step_attempts ADD COLUMN remote_endpoint text;
