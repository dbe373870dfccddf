-- Weft session store, SQLite, version 1.
-- JSON columns hold serde_json's text exactly as written. Integers are u64 values stored as
-- signed 64-bit integers (the store refuses anything above i64::MAX). Tables whose rows hold
-- JSON (often kilobytes) keep a rowid: WITHOUT ROWID suits small rows only.

CREATE TABLE sessions (
    id            TEXT    NOT NULL PRIMARY KEY,
    owner         TEXT,
    status        TEXT    NOT NULL,   -- SessionStatus::as_str (snake_case)
    head          TEXT    NOT NULL,   -- SessionHead as JSON
    version       INTEGER NOT NULL,
    message_count INTEGER NOT NULL,
    reserved_seq  INTEGER NOT NULL DEFAULT 0,
    last_seq      INTEGER NOT NULL DEFAULT 0,
    next_deadline INTEGER,            -- ms since the epoch
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);

CREATE INDEX sessions_owner_updated ON sessions (owner, updated_at DESC, id);
CREATE INDEX sessions_updated ON sessions (updated_at DESC, id);
CREATE INDEX sessions_due ON sessions (status, next_deadline);

CREATE TABLE messages (
    session_id TEXT    NOT NULL,
    idx        INTEGER NOT NULL,
    message    TEXT    NOT NULL,      -- Message as JSON
    PRIMARY KEY (session_id, idx)
);

CREATE TABLE runs (
    session_id TEXT NOT NULL PRIMARY KEY,
    run        TEXT NOT NULL          -- RunState as JSON
);

CREATE TABLE events (
    session_id TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    run_id     TEXT    NOT NULL,
    node_id    TEXT,
    at         INTEGER NOT NULL,
    event      TEXT    NOT NULL,      -- AgentEvent as JSON
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE checkpoints (
    ord        INTEGER PRIMARY KEY,   -- insertion order (kept when a checkpoint is replaced)
    session_id TEXT    NOT NULL,
    namespace  TEXT    NOT NULL,
    id         TEXT    NOT NULL,
    parent_id  TEXT,
    at         INTEGER NOT NULL,
    value      TEXT    NOT NULL,      -- JSON
    UNIQUE (session_id, namespace, id)
);

CREATE INDEX checkpoints_order ON checkpoints (session_id, namespace, at);

CREATE TABLE leases (
    session_id TEXT    NOT NULL PRIMARY KEY,
    holder     TEXT    NOT NULL,
    expires_at INTEGER NOT NULL       -- ms since the epoch, by the machine's clock
) WITHOUT ROWID;
