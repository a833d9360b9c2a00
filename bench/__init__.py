"""Benchmark scripts for vaultsearch (not tests): build timings, baselines, synthetic vaults.

Run them as modules from the repository root, e.g. ``python -m bench.bench_build``.
Results go to ``bench/results/*.json``; Markdown tables are rendered from that JSON.
"""
