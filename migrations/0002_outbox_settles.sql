-- A reply settles the messages it answers in the same statement that stores it, and its
-- delivery (or final failure) settles them again: one round trip to SQLite instead of a
-- multi-statement transaction on the hot path, with the same all-or-nothing guarantee.
ALTER TABLE outbox ADD COLUMN settles TEXT;
ALTER TABLE outbox ADD COLUMN settle_status TEXT;

CREATE TRIGGER outbox_settles_inbound AFTER INSERT ON outbox
WHEN NEW.settles IS NOT NULL
BEGIN
    UPDATE inbound
       SET status = NEW.settle_status, outbox_id = NEW.id, error = NEW.error,
           updated_at = NEW.created_at
     WHERE id IN (SELECT value FROM json_each(NEW.settles));
END;

CREATE TRIGGER outbox_sent_delivers_inbound AFTER UPDATE OF status ON outbox
WHEN NEW.status = 'sent'
BEGIN
    UPDATE inbound SET status = 'delivered', updated_at = NEW.sent_at
     WHERE outbox_id = NEW.id AND status = 'answered';
END;

CREATE TRIGGER outbox_failed_fails_inbound AFTER UPDATE OF status ON outbox
WHEN NEW.status = 'failed'
BEGIN
    UPDATE inbound SET status = 'failed', error = NEW.error,
           updated_at = (julianday('now') - 2440587.5) * 86400.0
     WHERE outbox_id = NEW.id AND status = 'answered';
END;
