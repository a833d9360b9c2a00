"""The watcher's builds on what its last build knew (``core.build.known``): a change no event named (a watch
that missed it) is found by the one walk the watcher makes when quiet after such builds, and built."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.build.builder import build_index
from core.build.watch import RESCAN, Watcher
from core.errors import IntegrityError
from core.searcher import search_vault
from tests.conftest import note, write_vault


def _hits(vault: Path, word: str) -> list[str]:
    return [h.rel_path for h in search_vault(vault, word, 5, "fts", freshness=False).hits]


def test_a_change_no_event_named_is_found_by_the_walk_when_quiet(tmp_path: Path) -> None:
    vault = write_vault(tmp_path / "v", {"n0.md": note("n0", "alpha"), "n1.md": note("n1", "beta")})
    for name in ("n0.md", "n1.md"):  # old notes: not racy, vouched for by their stat
        os.utime(vault / name, (1_700_000_000, 1_700_000_000))
    build_index(vault)
    watcher = Watcher(vault)  # not started: its builds are driven here, and no event reaches it
    assert watcher.build_once().ok and watcher.known.peek() is not None
    (vault / "n1.md").write_text(note("n1", "beta zanzibar"), encoding="utf-8")
    (vault / "n0.md").write_text(note("n0", "alpha quokka"), encoding="utf-8")
    with watcher._cond:
        watcher._pending["n0.md"] = 0.0  # the one event that arrived
    assert watcher.build_once().ok and watcher.known.trusted
    assert _hits(vault, "quokka") == ["n0.md"] and _hits(vault, "zanzibar") == [], "n1's event was missed"
    watcher._walk_once()
    assert RESCAN in watcher._pending and not watcher.known.trusted
    assert watcher.build_once().ok
    assert _hits(vault, "zanzibar") == ["n1.md"]
    watcher._walk_once()  # the walk vouched for everything: nothing more until builds trust events again
    assert not watcher._pending


def _trusting(vault: Path) -> Watcher:
    """A watcher (not started) whose last build trusted an event (of the vault's first note): a walk is owed."""
    build_index(vault)
    watcher = Watcher(vault)
    assert watcher.build_once().ok
    with watcher._cond:
        watcher._pending[sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*.md"))[0]] = 0.0
    assert watcher.build_once().ok and watcher.known.trusted
    return watcher


def test_the_quiet_walk_gives_way_to_an_event(tmp_path: Path) -> None:
    """An edit never waits for the quiet walk: an event arriving during it stops it between two folders, and
    it walks again at the next quiet moment (still owed)."""
    watcher = _trusting(write_vault(tmp_path / "v", {f"d{i}/n{i}.md": note(f"n{i}", "alpha") for i in range(5)}))
    asked: list[int] = []

    def event_after_two_folders() -> set[str]:
        asked.append(1)
        return {"d1/n1.md"} if len(asked) > 2 else set()

    assert watcher.known.missed(watcher.vault, watcher.layout, event_after_two_folders) is None
    assert len(asked) == 3 and watcher.known.trusted, "given up at the event, and still owed"
    assert watcher.known.missed(watcher.vault, watcher.layout, set) == [] and not watcher.known.trusted


def test_a_quiet_walk_that_cannot_read_the_index_leaves_it_to_a_full_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index's settings cannot be read for the walk (a broken index): the watcher does not stop, it asks for
    a full build, which reports what is wrong the usual way."""
    from core.build import known as known_module

    watcher = _trusting(write_vault(tmp_path / "v", {"n0.md": note("n0", "alpha")}))

    def broken(_layout: object) -> None:
        raise IntegrityError("the active generation cannot be read")

    monkeypatch.setattr(known_module, "config_of_active", broken)
    watcher._walk_once()
    assert RESCAN in watcher._pending and watcher.known.peek() is None and not watcher.known.trusted


def test_a_folder_renamed_is_built_from_a_walk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder event names no note: the watcher forgets what it knew and the build walks, so every note
    under the folder's new name is indexed and none under the old."""
    from core.build.source import WorkingTreeSource

    vault = write_vault(
        tmp_path / "v", {"old/a.md": note("a", "quokka"), "old/b.md": note("b", "wombat"), "c.md": note("c", "x")}
    )
    build_index(vault)
    watcher = Watcher(vault)
    assert watcher.build_once().ok and watcher.known.peek() is not None
    (vault / "old").rename(vault / "new")
    watcher._note_changes([(None, str(vault.resolve() / "new")), (None, str(vault.resolve() / "old"))])
    assert RESCAN in watcher._pending
    walks: list[int] = []
    real_scan = WorkingTreeSource.scan

    def counted(self: WorkingTreeSource) -> object:
        walks.append(1)
        return real_scan(self)

    monkeypatch.setattr(WorkingTreeSource, "scan", counted)
    assert watcher.build_once().ok
    assert walks == [1], "the build walked the vault"
    assert _hits(vault, "quokka") == ["new/a.md"] and _hits(vault, "wombat") == ["new/b.md"]
