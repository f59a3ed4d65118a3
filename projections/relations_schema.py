"""The tables of relational memory's Postgres read model (#26), apart from the projector that fills
them (projections/relations.py): projections/pg.py creates them with the namespace's other read
models, so the API can read a new namespace before pg-relations has run, without an import cycle."""

DDL = """
CREATE TABLE IF NOT EXISTS {s}.entities (
    user_id     text NOT NULL,
    entity_id   text NOT NULL,
    entity_type text NOT NULL,
    name        text,
    aliases     text[] NOT NULL DEFAULT '{{}}',
    source_turn text NOT NULL,
    event_id    text NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (user_id, entity_id)
);
CREATE INDEX IF NOT EXISTS entities_user_type ON {s}.entities (user_id, entity_type);
-- resolving a name (case-insensitive; aliases are matched among the user's few entities)
CREATE INDEX IF NOT EXISTS entities_user_name ON {s}.entities (user_id, lower(name));
CREATE TABLE IF NOT EXISTS {s}.relations (
    user_id           text NOT NULL,
    relation_id       text NOT NULL,
    subject_id        text NOT NULL,
    predicate         text NOT NULL,
    object_id         text NOT NULL,
    valid_from        timestamptz NOT NULL,
    valid_to          timestamptz,          -- NULL while current
    recorded_at       timestamptz NOT NULL, -- the assertion's event time
    ended_at_recorded timestamptz,          -- the ending's event time
    end_reason        text,
    ended_by          text,
    source_turn       text NOT NULL,
    ended_turn        text,
    evidence          text NOT NULL DEFAULT '',
    event_id          text NOT NULL,
    PRIMARY KEY (user_id, relation_id)
);
-- a user's current relations, from either end; as-of reads and traversal by subject / object
CREATE INDEX IF NOT EXISTS relations_current ON {s}.relations (user_id, subject_id, predicate) WHERE valid_to IS NULL;
CREATE INDEX IF NOT EXISTS relations_subject ON {s}.relations (user_id, subject_id, valid_from);
CREATE INDEX IF NOT EXISTS relations_object ON {s}.relations (user_id, object_id, valid_from);
CREATE INDEX IF NOT EXISTS relations_predicate ON {s}.relations (user_id, predicate, valid_from);
"""
