"""Benchmarks, run by hand (not by CI): python bench/<name>.py."""
