-- Every pause, oldest first (`rara limits list`, `rara status`, `rara list`).
SELECT kind::text AS "kind!", target, paused_at FROM flow_pauses ORDER BY paused_at, kind, target
