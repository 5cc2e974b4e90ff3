-- `picobridge failed retry` asks for a message (to the agent again) or a reply (to the
-- platform again) that failed for good; the daemon takes each request up, running or at its
-- next start, and deletes it. A request is the only thing the CLI writes, so a running
-- daemon and the command line never both hand out one message.
CREATE TABLE retry_requests (
    kind         TEXT NOT NULL CHECK (kind IN ('message', 'reply')),
    item_id      INTEGER NOT NULL,
    requested_at REAL NOT NULL,
    PRIMARY KEY (kind, item_id)
);

CREATE INDEX inbound_failed ON inbound(status, updated_at) WHERE status = 'failed';
CREATE INDEX outbox_failed ON outbox(status, created_at) WHERE status = 'failed';
