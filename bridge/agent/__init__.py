"""The agent side: protocol-neutral port, framing, child processes and protocol drivers."""
