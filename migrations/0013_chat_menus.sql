-- The command menus a platform was asked to show one chat in place of the bot's own (Telegram's
-- chat-scoped commands), so that a restart does not ask again for every chat: `menu` is a
-- fingerprint of the commands set there. A chat showing the bot's own menu has no row.
CREATE TABLE chat_menus (
    chat_key   TEXT PRIMARY KEY,
    menu       TEXT NOT NULL,
    updated_at REAL NOT NULL
);
