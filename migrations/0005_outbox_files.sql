-- The files a reply carries (JSON: name, path of the stored copy, mime, size, caption), sent
-- with its text; NULL for a reply of text alone.
ALTER TABLE outbox ADD COLUMN files TEXT;
