-- What a person chose for a conversation (/model, /think), applied by the agent's driver each
-- time the session is switched in. Keyed by session id: a chat's sessions each keep their own.
CREATE TABLE session_settings (
    session_id  TEXT PRIMARY KEY,
    model       TEXT,
    thinking    TEXT,
    updated_at  REAL NOT NULL
);

-- A chat's own choices: what its messages do while its agent works (/mode).
CREATE TABLE chat_settings (
    chat_key    TEXT PRIMARY KEY,
    busy_mode   TEXT,
    updated_at  REAL NOT NULL
);
