-- Chats and their current agent session. A chat is a platform conversation: a DM, a group,
-- a Telegram forum topic or a Slack thread (chat_key = platform:chat_id[:thread_id]).
CREATE TABLE chats (
    chat_key    TEXT PRIMARY KEY,
    platform    TEXT NOT NULL,
    chat_id     TEXT NOT NULL,
    thread_id   TEXT,
    session_id  TEXT NOT NULL,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL
);

-- Every session a chat has had, so /new rotates without forgetting the old one: late agent
-- responses for an old session still find their chat.
CREATE TABLE sessions (
    session_id  TEXT PRIMARY KEY,
    chat_key    TEXT NOT NULL REFERENCES chats(chat_key),
    created_at  REAL NOT NULL,
    ended_at    REAL
);
CREATE INDEX sessions_by_chat ON sessions(chat_key, created_at);

-- Outgoing replies, kept until the platform accepted them.
CREATE TABLE outbox (
    id          INTEGER PRIMARY KEY,
    chat_key    TEXT NOT NULL REFERENCES chats(chat_key),
    session_id  TEXT,
    kind        TEXT NOT NULL,
    text        TEXT NOT NULL,
    reply_to    TEXT,
    private_to  TEXT,
    status      TEXT NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'sent', 'failed')),
    attempts    INTEGER NOT NULL DEFAULT 0,
    error       TEXT,
    created_at  REAL NOT NULL,
    sent_at     REAL
);
CREATE INDEX outbox_pending ON outbox(status, chat_key, id);

-- Every message a user sent, kept until its reply is delivered.
-- received -> dispatched -> answered -> delivered; or failed / dropped (/stop).
CREATE TABLE inbound (
    id              INTEGER PRIMARY KEY,
    platform        TEXT NOT NULL,
    platform_msg_id TEXT NOT NULL,
    chat_key        TEXT NOT NULL REFERENCES chats(chat_key),
    session_id      TEXT NOT NULL,
    sender_id       TEXT NOT NULL,
    sender_name     TEXT NOT NULL DEFAULT '',
    text            TEXT NOT NULL,
    attachments     TEXT NOT NULL DEFAULT '[]',
    reply_to        TEXT,
    status          TEXT NOT NULL DEFAULT 'received'
                    CHECK (status IN ('received', 'dispatched', 'answered', 'delivered',
                                      'failed', 'dropped')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    outbox_id       INTEGER REFERENCES outbox(id),
    error           TEXT,
    received_at     REAL NOT NULL,
    updated_at      REAL NOT NULL,
    UNIQUE (platform, platform_msg_id)
);
CREATE INDEX inbound_open ON inbound(status, id);
CREATE INDEX inbound_by_outbox ON inbound(outbox_id);

-- Platform positions, such as the Telegram getUpdates offset.
CREATE TABLE cursors (
    name        TEXT PRIMARY KEY,
    value       TEXT NOT NULL,
    updated_at  REAL NOT NULL
);

-- Users let in by the operator (`picobridge access allow`), beside the config's allow lists.
CREATE TABLE access_grants (
    platform    TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    allowed     INTEGER NOT NULL,
    changed_at  REAL NOT NULL,
    PRIMARY KEY (platform, user_id)
);

-- Unknown users already told how to get access, so they are told once, not on every message.
CREATE TABLE access_notices (
    platform    TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    notified_at REAL NOT NULL,
    PRIMARY KEY (platform, user_id)
);
