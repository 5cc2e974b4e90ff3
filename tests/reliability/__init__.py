"""Long-running reliability tests (marked `slow`; CI still runs them)."""
