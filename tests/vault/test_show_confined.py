"""``show`` reads a note through the one confined, pinned open (issue 28, case 2 and 10).

The path is checked, then the file is opened once (no-follow, non-blocking, a regular file, the
opened descriptor's path inside the vault) and the bytes of that descriptor are shown: a folder
flipped to a symlink out of the vault after the check, or a note replaced by a FIFO, never shows
an outside file nor blocks.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

import core.vault.show as show
from core.errors import VaultSearchError
from core.vault.show import show_note

OUTSIDE = "OUTSIDE-SECRET not a note of the vault\n"


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    (root / "folder").mkdir(parents=True)
    (root / "folder" / "note.md").write_text("# Note\n\nThe inside text.\n", encoding="utf-8")
    outside = tmp_path / "outside" / "folder"
    outside.mkdir(parents=True)
    (outside / "note.md").write_text(OUTSIDE, encoding="utf-8")
    return root


def _to_outside(vault: Path) -> None:
    """The vault's ``folder`` becomes a symlink to a folder outside the vault."""
    os.rename(vault / "folder", vault / ".stash")
    (vault / "folder").symlink_to(vault.parent / "outside" / "folder", target_is_directory=True)


def _back_inside(vault: Path) -> None:
    (vault / "folder").unlink()
    os.rename(vault / ".stash", vault / "folder")


def _shown(vault: Path) -> str:
    try:
        return "\n".join(show_note(vault, "folder/note.md").lines)
    except VaultSearchError as exc:
        assert exc.reason in ("note_not_found", "path_outside_vault"), exc.to_dict()
        return ""


def test_show_serves_the_descriptor_it_checked_not_a_folder_flipped_after(vault, monkeypatch):
    """The worst moment of the race, made deterministic: the folder leaves the vault right after
    the path was confined, before the file is opened."""
    confined = show.confined_note_path

    def flip_after(root: Path, rel_path: str):
        found = confined(root, rel_path)
        _to_outside(vault)
        return found

    monkeypatch.setattr(show, "confined_note_path", flip_after)
    with pytest.raises(VaultSearchError) as info:
        show_note(vault, "folder/note.md")
    assert info.value.reason == "path_outside_vault"


@pytest.mark.parametrize("proc_fd", [True, False], ids=["proc_fd_check", "no_follow_walk"])
def test_show_never_shows_a_file_outside_while_a_folder_flips(vault, monkeypatch, proc_fd):
    """A thread flips the folder in and out of the vault while 1,000 ``show`` calls run: zero
    calls show the outside file."""
    import core.vault.scan as scan

    monkeypatch.setattr(scan, "_HAS_FD_DIR", proc_fd)
    stop, flipping = threading.Event(), threading.Event()
    flips = [0]

    def flip() -> None:
        while not stop.is_set():
            _to_outside(vault)
            _back_inside(vault)
            flips[0] += 1
            flipping.set()

    flipper = threading.Thread(target=flip)
    flipper.start()
    try:
        flipping.wait()
        shown = [_shown(vault) for _ in range(1000)]
    finally:
        stop.set()
        flipper.join()
    assert flips[0] > 1
    assert not [t for t in shown if "OUTSIDE-SECRET" in t]


def test_show_of_a_note_replaced_by_a_fifo_is_not_regular_file(vault, monkeypatch):
    confined = show.confined_note_path
    fifo = vault / "folder" / "note.md"

    def fifo_after(root: Path, rel_path: str):
        found = confined(root, rel_path)
        fifo.unlink()
        os.mkfifo(fifo)
        return found

    monkeypatch.setattr(show, "confined_note_path", fifo_after)
    box: dict[str, object] = {}

    def run() -> None:
        try:
            show_note(vault, "folder/note.md")
        except VaultSearchError as exc:
            box["error"] = exc

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(30)
    if worker.is_alive():  # today's code blocks on the FIFO: open its write end so the test ends
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join()
        pytest.fail("show blocked on a FIFO")
    err = box.get("error")
    assert isinstance(err, VaultSearchError) and err.reason == "not_regular_file"
