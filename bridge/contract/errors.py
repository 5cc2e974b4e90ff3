"""What bridge and adapters raise to each other."""

from __future__ import annotations


class StorageUnavailable(Exception):
    """Raised by `BridgeLink` calls while the bridge cannot write (a full disk, a database
    locked by another process or read-only). Nothing was stored: the adapter must not
    acknowledge the message to its platform, and offers it again after a pause. It is
    transient, never a reason to skip a message; the bridge logs the outage once."""


class DeliveryError(Exception):
    """Raised by `Adapter.send_reply` when a reply could not be delivered.

    Transient errors are retried later (after `retry_after` seconds when the platform said so);
    permanent ones are recorded as failed and not retried.
    """

    def __init__(self, message: str, *, permanent: bool = False,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.permanent = permanent
        self.retry_after = retry_after
