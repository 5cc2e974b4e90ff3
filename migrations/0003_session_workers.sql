-- Which agent worker serves a session (agent pools): kept so a session returns to the worker
-- holding its conversation after a daemon restart. One row per session that ran a turn.
CREATE TABLE session_workers (
    session_id TEXT PRIMARY KEY,
    worker TEXT NOT NULL,
    assigned_at REAL NOT NULL
);
