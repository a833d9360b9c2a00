"""``read_note`` serves only what the build would serve, from one confined, pinned open (issue 28).

- classification: read again with the build's own reader (``core.vault.notes``): whatever the
  build would hide (secret, a key it cannot read exactly, a YAML error, an unclosed fence, an empty
  value) is ``note_not_found``, the same answer as a path that was never there;
- the file is opened once, confined to the vault, and the bytes of that descriptor are served: a
  symlink or folder flipped out of the vault between the lookup and the read is refused;
- a FIFO is ``not_regular_file`` at once (never a blocking open);
- ``max_bytes`` covers the note's frontmatter and text together; a note over the build's size
  limit is ``note_too_large`` without being read.
"""

from __future__ import annotations

import os
import threading
import tracemalloc
from pathlib import Path

import pytest

from core.build.builder import build_index
from core.errors import NoteNotFoundError, VaultSearchError
from core.index.freshness import FreshnessOptions
from core.serve import schema as s
from core.serve.tools import ServeConfig, Tools
from core.vault.notes import parse_note

PUBLIC = "---\ntitle: Plans\n---\n# Plans\n\nThe harbour plans.\n"
OUTSIDE = "OUTSIDE-SECRET the file that is not in the vault\n"


def _tools(vault: Path) -> Tools:
    return Tools(ServeConfig(vault, freshness=FreshnessOptions(enabled=False)))


@pytest.fixture
def served(tmp_path: Path) -> tuple[Path, Tools]:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "plans.md").write_text(PUBLIC, encoding="utf-8")
    (vault / "other.md").write_text("# Other\n\nSomething else.\n", encoding="utf-8")
    build_index(vault)
    return vault, _tools(vault)


# ---------------------------------------------------------------- case 1: the build's classification reader

HIDING_EDITS = {
    "cased_key": "---\nClassification: secret\n---\n# Plans\n\nSECRET text.\n",
    "duplicated_key": "---\nclassification: secret\nclassification: public\n---\n# Plans\n\nSECRET text.\n",
    "yaml_error": "---\nclassification: secret\ntitle: [unclosed\n---\n# Plans\n\nSECRET text.\n",
    "unclosed_fence": "---\nclassification: secret\n# Plans\n\nSECRET text.\n",
    "empty_value": "---\nclassification:\n---\n# Plans\n\nSECRET text.\n",
    "plain_secret": "---\nclassification: secret\n---\n# Plans\n\nSECRET text.\n",
}


@pytest.mark.parametrize("edit", sorted(HIDING_EDITS))
def test_read_note_hides_what_the_build_would_hide(served, edit):
    vault, tools = served
    text = HIDING_EDITS[edit]
    parsed = parse_note("plans.md", text.encode())
    assert parsed is not None and parsed.classification in ("secret", "unreadable")  # the build hides it
    (vault / "plans.md").write_text(text, encoding="utf-8")  # edited after the build: the index says public
    with pytest.raises(NoteNotFoundError) as hidden:
        tools.call("read_note", {"path": "plans.md"})
    with pytest.raises(NoteNotFoundError) as never:
        tools.call("read_note", {"path": "never.md"})
    assert hidden.value.reason == never.value.reason == "note_not_found"
    assert "SECRET" not in str(hidden.value.to_dict())


def test_read_note_still_serves_a_note_the_build_would_serve(served):
    vault, tools = served
    (vault / "plans.md").write_text("---\nclassification: Public \n---\n# Plans\n\nNew text.\n", encoding="utf-8")
    out = tools.call("read_note", {"path": "plans.md", "from_line": 1})
    assert "New text." in out["text"] and out["changed_since_index"] is True


# ---------------------------------------------------------------- case 2: one confined, pinned open


def _outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir(exist_ok=True)
    (out / "target.md").write_text(OUTSIDE, encoding="utf-8")
    return out / "target.md"


def _point(link: Path, target: Path) -> None:
    """Atomically make ``link`` a symlink to ``target``."""
    tmp = link.with_name(".flip-tmp")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target)
    os.replace(tmp, link)


def _served_text(tools: Tools, path: str) -> str:
    try:
        out = tools.call("read_note", {"path": path, "from_line": 1})
    except VaultSearchError as exc:
        assert exc.reason in ("path_outside_vault", "note_not_found"), exc.to_dict()
        return ""
    return str(out["text"]) + str(out["frontmatter"])


@pytest.fixture
def linked(tmp_path: Path) -> tuple[Path, Tools, Path]:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "inside.md").write_text("# Inside\n\nThe inside text.\n", encoding="utf-8")
    (vault / "link.md").symlink_to(vault / "inside.md")
    build_index(vault)
    return vault, _tools(vault), _outside(tmp_path)


def test_read_note_serves_the_descriptor_it_checked_not_a_symlink_flipped_after(linked, monkeypatch):
    """The worst moment of the race, made deterministic: the link leaves the vault right after the
    path was confined and looked up in the index, before the file is read."""
    vault, tools, outside = linked
    looked_up = Tools._note_row

    def flip_after(self, conn, rel):
        row = looked_up(self, conn, rel)
        _point(vault / "link.md", outside)
        return row

    monkeypatch.setattr(Tools, "_note_row", flip_after)
    with pytest.raises(VaultSearchError) as info:
        tools.call("read_note", {"path": "link.md"})
    assert info.value.reason == "path_outside_vault"


@pytest.mark.parametrize("proc_fd", [True, False], ids=["proc_fd_check", "no_follow_walk"])
def test_read_note_never_serves_a_file_outside_while_a_symlink_flips(linked, monkeypatch, proc_fd):
    """A thread flips the link between the in-vault note and an outside file while 600 calls run:
    zero calls serve the outside file (on Linux the opened descriptor's path is checked; where
    /proc/self/fd is missing every path component is opened without following symlinks)."""
    import core.vault.scan as scan

    monkeypatch.setattr(scan, "_HAS_FD_DIR", proc_fd)
    vault, tools, outside = linked
    inside = vault / "inside.md"
    stop, flipping = threading.Event(), threading.Event()
    flips = [0]

    def flip() -> None:
        while not stop.is_set():
            _point(vault / "link.md", outside if flips[0] % 2 == 0 else inside)
            flips[0] += 1
            flipping.set()

    flipper = threading.Thread(target=flip)
    flipper.start()
    try:
        flipping.wait()
        served = [_served_text(tools, "link.md") for _ in range(600)]
    finally:
        stop.set()
        flipper.join()
    assert flips[0] > 1
    assert not [t for t in served if "OUTSIDE-SECRET" in t]


# ---------------------------------------------------------------- case 10: a FIFO is refused at once


def _call_or_unblock(fifo: Path, call):
    """Run ``call`` in a thread; if it blocks on the FIFO, open the FIFO's write end so that it
    returns (today's code would otherwise hang the test run) and report the hang."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["result"] = call()
        except VaultSearchError as exc:
            box["error"] = exc

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(30)
    if worker.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # the reader is there: unblocks it
        worker.join()
        pytest.fail("the read blocked on a FIFO")
    return box


def test_read_note_of_a_note_replaced_by_a_fifo_is_not_regular_file(served):
    vault, tools = served
    (vault / "plans.md").unlink()
    os.mkfifo(vault / "plans.md")
    box = _call_or_unblock(vault / "plans.md", lambda: tools.call("read_note", {"path": "plans.md"}))
    err = box.get("error")
    assert isinstance(err, VaultSearchError) and err.reason == "not_regular_file"


# ---------------------------------------------------------------- case 9: budgets


def test_read_note_max_bytes_covers_the_frontmatter_too(served):
    vault, tools = served
    big = "---\ntitle: Plans\ndescription: " + "x" * 3_000_000 + "\n---\n# Plans\n\nThe harbour plans.\n"
    (vault / "plans.md").write_text(big, encoding="utf-8")
    for budget in (256, 16384):
        out = tools.call("read_note", {"path": "plans.md", "max_bytes": budget})
        returned = len(s.dumps({"frontmatter": out["frontmatter"], "text": out["text"]}).encode())
        assert returned <= budget + len('{"frontmatter":,"text":}')
        assert out["frontmatter"] == {} and out["frontmatter_omitted"] is True and out["truncated"] is True
        assert out["text"].startswith("5: # Plans")  # the body is still served


def test_read_note_of_a_note_over_the_build_limit_is_refused_without_reading_it(served):
    vault, tools = served
    with open(vault / "plans.md", "r+b") as handle:
        handle.truncate(64 * 1024 * 1024)  # grown to 64 MiB (sparse): over the build's 16 MiB limit
    tracemalloc.start()
    try:
        with pytest.raises(VaultSearchError) as info:
            tools.call("read_note", {"path": "plans.md"})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.reason == "note_too_large"
    assert peak < 4 * 1024 * 1024


def test_read_note_serves_a_window_of_a_large_note_without_a_list_of_its_lines(served):
    """A note of 900 kB of short lines under the build's limit: the window is found by counting,
    not by splitting the note (a list of its lines would cost ~20 times its size)."""
    vault, tools = served
    data = "# Plans\n\n" + "xy\n" * 300_000
    (vault / "plans.md").write_text(data, encoding="utf-8")
    tracemalloc.start()
    try:
        out = tools.call("read_note", {"path": "plans.md", "from_line": 200_000, "max_lines": 2})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out["text"] == "200000: xy\n200001: xy" and out["total_lines"] == 300_002
    assert peak < 4 * len(data)
