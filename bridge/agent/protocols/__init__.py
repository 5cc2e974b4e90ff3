"""Agent wire protocols, one driver module each."""
