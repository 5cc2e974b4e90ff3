"""Numbered migrations, `NNNN_name.sql` or `NNNN_name.py` (a data step), one sequence for both
kinds; picobridge.store.schema applies them and explains the rules."""
