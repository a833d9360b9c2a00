"""Watch state and freshness tell a restricted caller exactly what the same vault without its
hidden notes would tell it (issue 28, case 4): changed, added and removed notes, pending builds,
a failed build's paths and message, for several visible sets.

Each case keeps two vaults: ``full`` (with notes the caller may not see: other classifications,
an unreadable classification, a binary file) and ``ref`` (the same without them), applies the same
changes to both (a change to a hidden note only to ``full``; a note that becomes hidden is
deleted from ``ref``, one that becomes visible is created there) and compares what each says.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from core.build.builder import build_index
from core.build.watch import Watcher
from core.errors import BuildIOError, IndexBusyError
from core.index.freshness import FreshnessOptions, clear_cache
from core.index.status import index_status
from core.searcher import search_vault
from core.serve.tools import ServeConfig, Tools
from tests.conftest import note
from tests.serve.serve_helpers import wait_until

BINARY = "\x00\x01\x02binary\x00"
START = {  # rel_path -> (text, classification level as a visible set names it; None: never visible)
    "pub/a.md": (note("A", "Alpha harbour."), "public"),
    "pub/b.md": (note("B", "Beta harbour.", classification="public"), "public"),
    "lan/c.md": (note("C", "Gamma harbour.", classification="lan"), "lan"),
    "sec/s.md": (note("S", "Secret harbour.", classification="secret"), "secret"),
    "sec/r.md": (note("R", "Restricted harbour.", classification="restricted"), "restricted"),
    "odd/yaml.md": ("---\ntitle: [unclosed\nclassification: public\n---\nYaml harbour.\n", None),
    "odd/bin.md": (BINARY, None),
}
CHANGES = {  # rel_path -> (new text or None for deleted, new level)
    "pub/a.md": (note("A", "Alpha harbour, edited."), "public"),
    "pub/new.md": (note("New", "A new harbour."), "public"),
    "pub/b.md": (note("B", "Beta harbour, now secret.", classification="secret"), "secret"),
    "lan/c.md": (note("C", "Gamma harbour, now public."), "public"),
    "sec/s.md": (None, "secret"),
    "sec/r.md": (note("R", "Restricted harbour, edited.", classification="restricted"), "restricted"),
    "sec/new.md": (note("New secret", "A new secret harbour.", classification="secret"), "secret"),
    "odd/yaml.md": (None, None),
    "odd/bin.md": (None, None),
}
VISIBLE_SETS = [("public",), ("public", "lan"), ("public", "restricted", "secret")]
NOW = FreshnessOptions(window_seconds=0.0)
FIELDS = ("stale", "added", "modified", "removed", "sample_paths", "modified_unverified")


def _write(root: Path, rel: str, text: str | None) -> None:
    path = root / rel
    if text is None:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))


def _vaults(tmp_path: Path, visible: tuple[str, ...]) -> tuple[Path, Path]:
    full, ref = tmp_path / "full", tmp_path / "ref"
    for rel in (*START, *CHANGES):  # the same folders in both: a note, not a folder, is what differs
        (ref / rel).parent.mkdir(parents=True, exist_ok=True)
    for rel, (text, level) in START.items():
        _write(full, rel, text)
        if level in visible:
            _write(ref, rel, text)
    return full, ref


def _change(full: Path, ref: Path, visible: tuple[str, ...]) -> tuple[set[str], set[str]]:
    """Apply CHANGES to both vaults; (paths changed in full, paths changed in ref)."""
    in_ref = set()
    for rel, (text, level) in CHANGES.items():
        _write(full, rel, text)
        was = START.get(rel, (None, None))[1] in visible
        now = level in visible and text is not None
        if was or now:
            _write(ref, rel, text if now else None)
            in_ref.add(rel)
    return set(CHANGES), in_ref


def _hidden(visible: tuple[str, ...]) -> set[str]:
    """Paths the caller may never learn of: hidden before and after the changes."""
    levels = {rel: {START.get(rel, (None, None))[1], CHANGES.get(rel, (None, START[rel][1]))[1]} for rel in START}
    levels |= {rel: {level} for rel, (_, level) in CHANGES.items() if rel not in START}
    return {rel for rel, seen in levels.items() if not seen & set(visible)}


def _said(vault: Path, visible: tuple[str, ...]) -> dict:
    fresh = search_vault(vault, "harbour", 10, "fts", freshness=NOW, classifications=list(visible)).freshness
    return {k: fresh.get(k) for k in (*FIELDS, "source", "pending_build")}


@pytest.mark.parametrize("visible", VISIBLE_SETS, ids="+".join)
def test_a_walks_freshness_equals_the_vault_without_the_hidden_notes(tmp_path: Path, visible: tuple[str, ...]):
    clear_cache()
    full, ref = _vaults(tmp_path, visible)
    build_index(full)
    build_index(ref)
    _change(full, ref, visible)
    got, want = _said(full, visible), _said(ref, visible)
    assert got == want and got["stale"] is True
    assert not any(h in json.dumps(got) for h in _hidden(visible))


@pytest.fixture
def blocked_builds(monkeypatch):
    """Watch builds after the first wait on ``gate`` (or raise ``fail`` when it is set)."""
    import core.build.builder as builder

    real, gate, fail = builder.build_index, threading.Event(), []
    gate.set()

    def gated(*args, **kwargs):
        assert gate.wait(60)
        if fail:
            raise fail[0]
        return real(*args, **kwargs)

    monkeypatch.setattr(builder, "build_index", gated)
    yield gate, fail
    gate.set()


@pytest.mark.parametrize("visible", VISIBLE_SETS, ids="+".join)
def test_a_watchers_freshness_and_pending_equal_the_vault_without_the_hidden_notes(
    tmp_path: Path, visible: tuple[str, ...], blocked_builds
):
    gate, _ = blocked_builds
    clear_cache()
    full, ref = _vaults(tmp_path, visible)
    watchers = [Watcher(v, debounce_ms=50, lock_wait=0.0) for v in (full, ref)]
    try:
        for w in watchers:
            w.start()
            assert w.ready.wait(60)
        gate.clear()  # what freshness says now comes from the watchers' pending paths
        in_full, in_ref = _change(full, ref, visible)
        for w, paths in zip(watchers, (in_full, in_ref), strict=True):
            wait_until(lambda w=w, paths=paths: paths <= set(w.view().pending), what="the events")
        got, want = _said(full, visible), _said(ref, visible)
        assert got == want and (got["source"], got["stale"], got["pending_build"]) == ("watch", True, True)
        tools = Tools(ServeConfig(full, None, visible, NOW), watch_state=watchers[0].state)
        status = tools.status({})
        assert status["watch"]["pending"] == len(in_ref)
        assert not any(h in json.dumps(status) for h in _hidden(visible))
    finally:
        gate.set()
        for w in watchers:
            w.stop()


@pytest.mark.parametrize("error", [BuildIOError, IndexBusyError])
@pytest.mark.parametrize("visible", VISIBLE_SETS, ids="+".join)
def test_a_failed_watch_build_shows_only_visible_paths_and_no_message_naming_a_hidden_one(
    tmp_path: Path, visible: tuple[str, ...], error: type, blocked_builds
):
    _, fail = blocked_builds
    clear_cache()
    full, ref = _vaults(tmp_path, visible)
    watcher = Watcher(full, debounce_ms=50, lock_wait=0.0)
    try:
        watcher.start()
        assert watcher.ready.wait(60)
        named = " and ".join(str(full / rel) for rel in sorted(CHANGES))
        fail.append(error(f"could not read {named}", path=str(full / "sec/s.md")))
        in_full, in_ref = _change(full, ref, visible)
        wait_until(
            lambda: watcher.last is not None and not watcher.last.ok and set(watcher.last.changed_paths) == in_full,
            what="the failed build of every change",
        )
        want = sorted(in_ref)
        fresh = search_vault(full, "harbour", 10, "fts", classifications=list(visible)).freshness
        status = index_status(full, classifications=list(visible))
        served = Tools(ServeConfig(full, None, visible, NOW), watch_state=watcher.state).status({})
        for failure in (
            fresh["last_build_failure"],
            status["last_build_failure"],
            served["last_build_failure"],
            served["watch"]["last_failure"],
            served["watch"]["last_build"],
        ):
            assert failure["reason"] == error.reason and failure["changed_paths"] == want
            assert not any(h in json.dumps(failure) for h in _hidden(visible))
        unrestricted = index_status(full)["last_build_failure"]  # the full record, for whoever sees every note
        assert unrestricted["changed_paths"] == sorted(in_full) and "sec/s.md" in unrestricted["message"]
    finally:
        watcher.stop()
