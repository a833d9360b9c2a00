"""The watcher merges when idle (core.build.idle_merge): after a quiet period it merges the delta segments
its edits published, by the policy, into a generation with the same live notes; search answers as before,
freshness stays clean (no confirming build for its own merge), and the next edit is built as usual."""

from __future__ import annotations

from pathlib import Path

from core.build.lock import build_lock
from core.build.optimize import DROPPED, MERGED, segment_infos
from core.build.watch import Watcher
from core.index import verify
from core.index.layout import layout_for
from core.searcher import search_vault
from tests.conftest import note, write_vault
from tests.serve.serve_helpers import wait_until


def _ranked(vault: Path) -> list[tuple[str, float]]:
    verify.clear_verify_cache()
    return [(h.rel_path, h.score) for h in search_vault(vault, "alpha quoll", 10, "hybrid", freshness=False).hits]


def _edited(vault: Path, watcher: Watcher) -> None:
    for i in range(4):  # four edits, each its own build: a delta segment and a tombstone each
        builds = watcher.builds
        (vault / f"n{i}.md").write_text(note(f"N{i}", f"alpha quoll {i}"), encoding="utf-8")
        wait_until(lambda b=builds: watcher.builds > b and not watcher.last.up_to_date, what=f"edit {i}")


def _watcher(tmp_path: Path) -> tuple[Path, Watcher]:
    vault = write_vault(tmp_path / "vault", {f"n{i}.md": note(f"N{i}", f"alpha {i} beta") for i in range(6)})
    watcher = Watcher(vault, debounce_ms=50, lock_wait=0.0)
    watcher.idle.idle_seconds = 3600.0  # no merge while the edits arrive
    watcher.start()
    assert watcher.ready.wait(60)
    return vault, watcher


def test_the_watcher_merges_its_delta_segments_when_idle(tmp_path: Path) -> None:
    vault, watcher = _watcher(tmp_path)
    try:
        _edited(vault, watcher)
        before = segment_infos(verify.resolve(layout_for(vault)))
        assert len(before) == 5 and sum(s.dead for s in before) == 4
        expected, builds = _ranked(vault), watcher.builds
        watcher.idle.idle_seconds = 0.0
        wait_until(lambda: watcher.idle.merges == 1, what="the idle merge")
        assert watcher.idle.last is not None and watcher.idle.last.outcome == MERGED
        after = verify.resolve(layout_for(vault))
        assert after.generation_id == watcher.idle.last.generation_after
        assert len(segment_infos(after)) == 1 and _ranked(vault) == expected
        fresh = search_vault(vault, "quoll", 10, "fts").freshness
        assert (fresh["source"], fresh["stale"]) == ("watch", False)
        assert watcher.builds == builds  # its own merge is no foreign generation to confirm by a build
        (vault / "n5.md").write_text(note("N5", "alpha quoll late"), encoding="utf-8")
        wait_until(lambda: "n5.md" in {h.rel_path for h in search_vault(vault, "late", 5, "fts").hits}, what="n5")
    finally:
        watcher.stop()


def test_a_build_holding_the_lock_wins_over_the_idle_merge_which_tries_again(tmp_path: Path) -> None:
    vault, watcher = _watcher(tmp_path)
    try:
        _edited(vault, watcher)
        layout = layout_for(vault)
        with build_lock(layout):  # an `index` run holds the lock: the merge is dropped, labelled
            watcher.idle.idle_seconds = 0.0
            wait_until(lambda: watcher.idle.last is not None, what="the dropped merge")
            assert watcher.idle.last.outcome == DROPPED and watcher.idle.merges == 0
            assert len(segment_infos(verify.resolve(layout))) == 5
        wait_until(lambda: watcher.idle.merges == 1, what="the merge, tried again")
        assert len(segment_infos(verify.resolve(layout))) == 1
    finally:
        watcher.stop()
