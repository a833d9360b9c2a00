"""bench/bench_fts_warm.py: a code tree's warm fts latency over a vault's queries, in its own process, with
the pruned run's answers counted (and none for a tree without it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import bench_fts_warm


def _queries(tmp_path: Path, queries: list[str]) -> Path:
    path = tmp_path / "queries.json"
    path.write_text(json.dumps(queries), encoding="utf-8")
    return path


def test_child_times_every_query_and_counts_the_pruned_runs(example_vault: Path, tmp_path: Path, monkeypatch) -> None:
    from core.ranking import pruning

    monkeypatch.setattr(bench_fts_warm, "WARMUP", 2)
    monkeypatch.setattr(bench_fts_warm, "LIMIT", 1)  # a small vault: at least k candidates for the top hit
    monkeypatch.setattr(pruning, "MIN_PARTIAL_POSTINGS", 1)  # the example vault's lists are short
    monkeypatch.setattr(pruning, "MIN_SKIPPED_POSTINGS", 1)
    queries = ["the note about a project", "meeting notes of the week", "zzzz-not-a-word"]
    out = bench_fts_warm.child(example_vault, _queries(tmp_path, queries))
    assert out["queries"] == 3 and out["p50_ms"] > 0 and out["p95_ms"] >= out["p50_ms"]
    assert 1 <= out["pruned"] <= 3  # a refused split is tried again (``refused`` counts attempts)


@pytest.mark.slow
def test_a_tree_runs_in_its_own_process(example_vault: Path, tmp_path: Path) -> None:
    out = bench_fts_warm.run_tree(bench_fts_warm.REPO_ROOT, example_vault, _queries(tmp_path, ["project"] * 25))
    assert out["queries"] == 25 and out["pruned"] == 0  # a small vault: nothing worth pruning


def test_queries_of_each_corpus_kind(tmp_path: Path) -> None:
    assert 50 <= len(bench_fts_warm.queries_for("powershell", tmp_path)) <= bench_fts_warm.N_QUERIES
    assert 50 <= len(bench_fts_warm.queries_for("scifact", tmp_path)) <= bench_fts_warm.N_QUERIES


def test_a_tree_with_its_own_copy_searches_that_copy(tmp_path: Path, monkeypatch) -> None:
    calls: list[tuple[str, Path]] = []

    def fake(tree: Path, vault: Path, queries_file: Path) -> dict:
        calls.append((tree.name, vault))
        return {"p50_ms": 1.0, "p95_ms": 2.0}

    monkeypatch.setattr(bench_fts_warm, "run_tree", fake)
    monkeypatch.setattr(bench_fts_warm, "queries_for", lambda name, vault: ["q"])
    monkeypatch.setattr(bench_fts_warm, "machine_info", lambda: {})  # psutil is the bench extra's, not the tests'
    (tmp_path / "old").mkdir()
    shared, own = tmp_path / "v", tmp_path / "v-old"
    args = ["--vault", f"scifact={shared}", "--code", f"before={tmp_path / 'old'}", "--rounds", "1"]
    bench_fts_warm.main([*args, "--vault-of", f"before:scifact={own}", "--out", str(tmp_path / "out.json")])
    assert calls == [(bench_fts_warm.REPO_ROOT.name, shared), ("old", own)]
