"""Benchmarks, run by hand (not by CI): python bench/<name>.py, or all of them with short
settings and one table of figures against targets: python bench/report.py."""
