-- Secrets are granted, not ambient (issue 41): a `{"$secret": name}` reference resolves only
-- when a grant here permits it for the step's workflow and operation (`rara secrets grant`).
-- Submit refuses an ungranted reference; the executor checks again at claim (a grant revoked
-- after submit fails the step, SECRET_NOT_GRANTED). docs/src/guide/secrets.md argues why a
-- table and not tags on the secret.
CREATE TABLE secret_grants (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- A secret name, or a pattern where `*` matches any run of characters (`payments/*`).
    secret      text NOT NULL,
    -- The workflows (run names) the grant covers, as a pattern; `*`: any workflow.
    workflow    text NOT NULL DEFAULT '*',
    -- The operations the grant covers, as a pattern; `*`: any operation.
    operation   text NOT NULL DEFAULT '*',
    -- The hosts an `http.request` may send the secret to (patterns, lower-case); NULL: any.
    hosts       text[],
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT secret_grants_secret_not_empty CHECK (secret <> ''),
    CONSTRAINT secret_grants_patterns_not_empty CHECK (workflow <> '' AND operation <> ''),
    CONSTRAINT secret_grants_hosts_not_empty CHECK (hosts IS NULL OR cardinality(hosts) > 0),
    -- One grant per (secret, workflow, operation): granting again replaces its hosts.
    CONSTRAINT secret_grants_one_per_scope UNIQUE (secret, workflow, operation)
);
