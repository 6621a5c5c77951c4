-- What the references of a claimed batch read, in one round trip: the outputs of the steps
-- named by the pairs ($1 run, $2 step name); the descriptors of the artifacts named by the
-- triples ($3 run, $4 step name, $5 artifact name), from each step's succeeded attempt (the
-- latest of that name); the inputs of the runs $6. One row per thing found: a step that has
-- not succeeded gives no output, a missing artifact no row. An output's `home` is the run it
-- was made in: the step's, or for a step a rerun carried over, the run of the step it was
-- carried from (its offloaded output lies under that run's prefix); offloaded inputs' `home`
-- likewise.
SELECT 'output' AS "kind!", s.run_id AS "run_id!", s.name AS "step?", NULL::text AS "artifact?",
       coalesce(s.output, 'null'::jsonb) AS "value!",
       coalesce((SELECT c.run_id FROM steps c WHERE c.id = s.carried_from), s.run_id) AS "home?"
FROM unnest($1::uuid[], $2::text[]) AS t(run_id, step)
JOIN step_names n ON n.run_id = t.run_id AND n.name = t.step
JOIN steps s ON s.id = n.step_id
WHERE s.status = 'succeeded'
UNION ALL
SELECT 'artifact', s.run_id, s.name, t.artifact, d.descriptor, NULL::uuid
FROM unnest($3::uuid[], $4::text[], $5::text[]) AS t(run_id, step, artifact)
JOIN step_names n ON n.run_id = t.run_id AND n.name = t.step
JOIN steps s ON s.id = n.step_id
CROSS JOIN LATERAL (
    SELECT jsonb_build_object('uri', a.uri, 'media_type', a.media_type, 'size_bytes', a.size_bytes,
                              'digest', a.digest) AS descriptor
    FROM artifacts a
    WHERE a.step_id = s.id AND a.attempt = s.attempt AND a.name = t.artifact
    ORDER BY a.id DESC LIMIT 1
) d
WHERE s.status = 'succeeded'
UNION ALL
SELECT 'inputs', w.id, NULL, NULL, w.inputs,
       -- Offloaded inputs: the run they were written under, this one or one it was rerun from
       -- (a rerun keeps the reference), by the run its URI names.
       CASE WHEN jsonb_typeof(w.inputs) = 'object' AND w.inputs ? '$stored' THEN (
           WITH RECURSIVE chain(id, rerun_of) AS (
               SELECT w.id, w.rerun_of
               UNION ALL
               SELECT r.id, r.rerun_of FROM workflow_runs r JOIN chain c ON r.id = c.rerun_of
           )
           SELECT c.id FROM chain c
           WHERE w.inputs -> '$stored' ->> 'uri' LIKE '%/runs/' || c.id::text || '/inputs.json'
           LIMIT 1)
       END
FROM workflow_runs w WHERE w.id = ANY($6::uuid[])
