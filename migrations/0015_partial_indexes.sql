-- Two indexes hold only the rows their lookups ask for. Each commit writes every page it
-- changed into the WAL whole, and a message's path commits several times (its arrival,
-- its answer, the answer sent): an index entry that no query reads still cost a page written.
-- Replies already sent (nearly all of them) leave outbox_pending, which only the replies
-- still to send are looked up by; a message not answered yet has no entry in
-- inbound_by_outbox, which is only looked up by a reply's id (`outbox_id = ?`, implying it
-- is not NULL, so these lookups, the triggers' and the foreign key's own, use it as before).
DROP INDEX outbox_pending;
CREATE INDEX outbox_pending ON outbox(status, chat_key, id) WHERE status = 'pending';
DROP INDEX inbound_by_outbox;
CREATE INDEX inbound_by_outbox ON inbound(outbox_id) WHERE outbox_id IS NOT NULL;
