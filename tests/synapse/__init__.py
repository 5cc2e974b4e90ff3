"""A real Synapse homeserver for the Matrix tests: installed in its own venv (install.py),
started on 127.0.0.1 with SQLite and a generated config (server.py), and a person who talks to
it over the client-server API (person.py)."""
