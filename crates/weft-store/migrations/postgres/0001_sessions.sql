-- Weft session store, Postgres, version 1.
-- JSON columns are TEXT holding serde_json's text exactly as written (jsonb would reorder keys
-- and normalize numbers). Integers are u64 values stored as BIGINT (the store refuses anything
-- above i64::MAX). Child rows go with their session (ON DELETE CASCADE), and the foreign keys
-- also make an insert racing a delete fail instead of leaving orphans.

CREATE TABLE sessions (
    id            TEXT    NOT NULL PRIMARY KEY,
    owner         TEXT,
    status        TEXT    NOT NULL,   -- SessionStatus::as_str (snake_case)
    head          TEXT    NOT NULL,   -- SessionHead as JSON
    version       BIGINT  NOT NULL,
    message_count BIGINT  NOT NULL,
    reserved_seq  BIGINT  NOT NULL DEFAULT 0,
    last_seq      BIGINT  NOT NULL DEFAULT 0,
    next_deadline BIGINT,             -- ms since the epoch
    created_at    BIGINT  NOT NULL,
    updated_at    BIGINT  NOT NULL
);

CREATE INDEX sessions_owner_updated ON sessions (owner, updated_at DESC, id);
CREATE INDEX sessions_updated ON sessions (updated_at DESC, id);
CREATE INDEX sessions_due ON sessions (status, next_deadline);

CREATE TABLE messages (
    session_id TEXT   NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    idx        BIGINT NOT NULL,
    message    TEXT   NOT NULL,       -- Message as JSON
    PRIMARY KEY (session_id, idx)
);

CREATE TABLE runs (
    session_id TEXT NOT NULL PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    run        TEXT NOT NULL          -- RunState as JSON
);

CREATE TABLE events (
    session_id TEXT   NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq        BIGINT NOT NULL,
    run_id     TEXT   NOT NULL,
    node_id    TEXT,
    at         BIGINT NOT NULL,
    event      TEXT   NOT NULL,       -- AgentEvent as JSON
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE checkpoints (
    session_id TEXT   NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    namespace  TEXT   NOT NULL,
    id         TEXT   NOT NULL,
    ord        BIGINT GENERATED ALWAYS AS IDENTITY,  -- insertion order (kept on replace)
    parent_id  TEXT,
    at         BIGINT NOT NULL,
    value      TEXT   NOT NULL,       -- JSON
    PRIMARY KEY (session_id, namespace, id)
);

CREATE INDEX checkpoints_order ON checkpoints (session_id, namespace, at, ord);

CREATE TABLE leases (
    session_id TEXT        NOT NULL PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    holder     TEXT        NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL   -- by the database's clock
);
