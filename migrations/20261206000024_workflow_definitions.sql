-- Registered workflow definitions (`rara workflow register`): one row per name and version.
-- A definition registered again with the same content is the same version; new content is the
-- next version. A run submitted from a registered definition records the version it was made from.
CREATE TABLE workflow_definitions (
    name       text NOT NULL,
    version    integer NOT NULL,
    -- The parsed definition as submit reads it (jsonb: the same content compares equal however
    -- its text was laid out).
    definition jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, version),
    CONSTRAINT workflow_definitions_version_positive CHECK (version > 0),
    CONSTRAINT workflow_definitions_name_not_empty CHECK (name <> '')
);

-- The same content under one name is one version, even when two registrations race.
CREATE UNIQUE INDEX workflow_definitions_content ON workflow_definitions (name, md5(definition::text));

-- The version a run was submitted from (NULL: from a file or the API's definition body).
ALTER TABLE workflow_runs ADD COLUMN workflow_version integer;
ALTER TABLE archived_workflow_runs ADD COLUMN workflow_version integer;

ALTER TABLE workflow_definitions OWNER TO rara_owner;
GRANT SELECT, INSERT ON workflow_definitions TO rara_runtime;
GRANT SELECT, INSERT ON workflow_definitions TO rara_console;
