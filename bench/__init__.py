"""Benchmarks: ``python -m bench [--quick] [--json] [NAME ...]``.

Each benchmark runs its compared variants in the same process run, alternating,
for several rounds, and prints medians and ratios. Benchmarks never run inside
the test suite and never assert times.
"""
