-- Whether the step $1 exists.
SELECT EXISTS (SELECT 1 FROM steps WHERE id = $1::uuid) AS "exists!"
