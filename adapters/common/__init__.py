"""What the platform adapters share, one job per module.

attachments   the attachment policy (sizes, inline text, media on disk)
textsplit     Markdown cut to a platform's limit without breaking code (fences, cuts: its parts)
multipart     one reply sent as several messages, resumable by its outbox id
partlog       the progress of such a send, kept in the bridge's cursors across restarts
drafts        a turn's streamed text (cheap per delta, bounded), and streamed drafts waiting,
              per chat and in turn order, for their own answers
serial        a chat's work one piece at a time, in arrival order; chats side by side
backoff       waits between attempts to reach a platform
tasks         background tasks kept, their failures logged, stopped together
"""
