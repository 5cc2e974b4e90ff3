"""Fixtures shared across end-to-end test modules (a session fixture defined here is one per
test process; imported into each module it would be one per module)."""

from tests.e2e.matrix_support import own_synapse, synapse

__all__ = ["own_synapse", "synapse"]
