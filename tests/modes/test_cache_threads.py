"""Issue 28 case 7: the per-process caches the request threads share (filter masks, generation
meta, stemmers) are locked: 8 threads searching with filters that keep evicting each other's
masks never fail (today: a bare ``KeyError`` from two threads evicting the same oldest entry)."""

from __future__ import annotations

import shutil
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import EXAMPLE_VAULT, MakeVault, note

from core.build.builder import build_index
from core.modes import context
from core.modes import segment_arrays as sa
from core.searcher import search_vault

THREADS, SEARCHES = 8, 150


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Switch threads as often as the interpreter allows: the interleavings a loaded server sees."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def _hammer(work: Callable[[int, int], None], rounds: int = SEARCHES) -> list[BaseException]:
    errors: list[BaseException] = []
    barrier = threading.Barrier(THREADS)

    def run(n: int) -> None:
        barrier.wait()
        for i in range(rounds):
            try:
                work(n, i)
            except BaseException as exc:  # every failure is counted, none is lost in a thread
                errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_threads_evicting_filter_masks_never_fail(
    make_vault: MakeVault, monkeypatch: pytest.MonkeyPatch, fast_switching: None
) -> None:
    files = {f"n{i}.md": note(f"Note {i}", "alpha beta gamma", tags=[f"t{i % 6}"]) for i in range(12)}
    vault = make_vault(files)
    monkeypatch.setattr(context._MASKS, "size", 2)  # every search evicts

    def work(n: int, i: int) -> None:
        tag = f"t{(n + i) % 6}"
        got = search_vault(vault, "alpha", 20, "fts", tags_any=[tag], freshness=False)
        assert {r.rel_path for r in got} == {f"n{k}.md" for k in range(12) if k % 6 == (n + i) % 6}

    errors = _hammer(work)
    assert errors == []


def test_each_thread_stems_with_its_own_stemmer() -> None:
    """PyStemmer's objects keep state while stemming and must not be shared by threads."""
    from core.ranking.languages import _stemmer

    mine = _stemmer("english")
    theirs: list[object] = []
    worker = threading.Thread(target=lambda: theirs.append(_stemmer("english")))
    worker.start()
    worker.join()
    assert mine is _stemmer("english") and theirs[0] is not mine


def test_threads_sharing_a_segmented_generations_view_rank_as_one_thread(tmp_path: Path, fast_switching: None) -> None:
    """Issue 29: a generation of segments is one view the request threads share (its gathers remember the last
    positions located, core.ranking.segment_runs): searches from 8 threads at once, in fts, vector and
    hybrid, rank exactly as the same searches one at a time."""
    root = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, root)
    build_index(root)
    for folder in ("projects", "people"):
        target = sorted((root / folder).glob("*.md"))[0]
        target.write_text(target.read_text(encoding="utf-8") + "\nA kumquat edit.\n", encoding="utf-8")
        build_index(root)
    queries = [("postgres connection pool", "fts"), ("search index", "vector"), ("kumquat", "hybrid"),
               ("meeting people", "fts"), ("vaul", "fts"), ("project decision", "vector")]  # fmt: skip

    def ranked(query: str, mode: str) -> list[tuple[str, float]]:
        found = search_vault(root, query, 10, mode=mode, freshness=False)
        return [(h.rel_path, h.score) for h in found.hits]

    expected = {q: ranked(*q) for q in queries}
    sa.SEGMENT_CACHE.clear()
    sa.COMBINED_CACHE.clear()  # every thread starts on no view: the first ones build it at once

    def work(n: int, i: int) -> None:
        q = queries[(n + i) % len(queries)]
        assert ranked(*q) == expected[q], q

    assert _hammer(work, rounds=6) == []
