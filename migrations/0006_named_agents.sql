-- Several named agents (issue 17). Every session belongs to one agent; a chat keeps a current
-- session per agent (one whose ended_at is NULL), so switching back to an agent resumes it,
-- and `chats.session_id` is the current session of the agent it talks to now (`chats.agent`).
-- What there was before belonged to the one agent there was, `default`: its sessions, their
-- workers (session_workers keeps the names w1.., which are the default agent's) and the
-- platforms' positions (cursors) stay as they are.
ALTER TABLE sessions ADD COLUMN agent TEXT NOT NULL DEFAULT 'default';
ALTER TABLE chats ADD COLUMN agent TEXT NOT NULL DEFAULT 'default';
-- The agent a person chose in the chat with /agent; NULL: the routes decide.
ALTER TABLE chats ADD COLUMN chosen_agent TEXT;
CREATE INDEX sessions_current ON sessions(chat_key, agent, ended_at);
