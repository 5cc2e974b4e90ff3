-- A chat's kind ("private" or "group", as its platform says), for the routes that match on it
-- where no message of the chat is at hand: messages left waiting for an agent that is no
-- longer configured go to the agent the chat's route names now (core/orphans.py). NULL: not
-- known (a chat not written to since this migration, until its next message).
ALTER TABLE chats ADD COLUMN kind TEXT;
