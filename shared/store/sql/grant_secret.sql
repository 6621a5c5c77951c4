-- Grants the secret pattern $1 to the workflows $2 and operations $3 (patterns), sending it
-- by http.request only to the hosts $4 (NULL: any) (`rara secrets grant`). Granting the same
-- scope again replaces its hosts.
INSERT INTO secret_grants AS g (secret, workflow, operation, hosts)
VALUES ($1::text, $2::text, $3::text, $4::text[])
ON CONFLICT (secret, workflow, operation) DO UPDATE SET hosts = excluded.hosts
RETURNING g.id, g.secret, g.workflow, g.operation, g.hosts, g.created_at
