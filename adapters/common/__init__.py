"""What the platform adapters share: attachments, splitting, resumable sends, backoff."""
