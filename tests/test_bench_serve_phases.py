"""bench/bench_serve.py times an incremental build by phase by wrapping named functions: each must still
exist where the bench looks for it (a moved function broke a 100k run at its last step)."""

from __future__ import annotations

from bench.bench_serve import incremental_phases


def test_every_timed_phase_names_a_function_that_exists() -> None:
    phases = incremental_phases()
    assert len(phases) >= 5
    for owner, name, label in phases:
        assert callable(getattr(owner, name, None)), (owner, name, label)
