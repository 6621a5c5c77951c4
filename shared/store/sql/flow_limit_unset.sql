-- Removes the operator's limit on the key or group $1 (`rara limits unset`); its steps are
-- held to their definitions' limits alone. Wakes the listening schedulers on $2. Returns the
-- target removed, none if there was no such limit.
WITH gone AS (
    DELETE FROM flow_limits WHERE target = $1::text RETURNING target
)
SELECT g.target AS "target!", pg_notify($2::text, '') IS NOT NULL AS "woke!" FROM gone g
