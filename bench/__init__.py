"""Benchmarks (`make bench`, `python -m bench [names...]`): figures measured against goals.

Not tests: a missed goal is printed as MISSED and does not fail the run; only a benchmark
that crashes does. Each module has `main() -> int`; `bench/__main__.py` lists them.
"""
