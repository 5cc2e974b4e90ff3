-- Per-user limits ([limits]) count a sender's messages over the last hour and day, across
-- chats; a message over the limit is kept, marked dropped with an error starting
-- "over the limit".
CREATE INDEX inbound_by_sender ON inbound(platform, sender_id, received_at);
