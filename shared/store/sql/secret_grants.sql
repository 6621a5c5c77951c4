-- Every grant (`rara secrets list`; read whole at submit and, cached briefly, at claim: the
-- table holds an operator's handful of rows).
SELECT id, secret, workflow, operation, hosts, created_at FROM secret_grants ORDER BY id
