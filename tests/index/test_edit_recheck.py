"""An edit's build looks again at what it read, not at the whole vault (issue 29: ``vaultsearch index`` after a
one-note edit at 100k notes).

- The re-check before publishing (``WorkingTreeSource.check_unchanged``) stats the files the build read or
  hashed and the ones it removed: no second walk of the vault.
- A file changed after the build read it still fails the build closed (``SourceChangedError``), the old
  generation serving.
- A file carried over unread (vouched for by its stat) that changes during the build does not fail it: the
  new generation keeps the row of the file as scanned (its stat with it), so the next build sees the change.
- The plan reads whole rows (id, content hash) only of the files it does not vouch for by stat.

The vaults are aged a day (a real vault's notes are old): a file written within the racy window of a scan is
never vouched for by its stat, so a freshly written vault would be read whole.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import write_files as write

from core import generations as gen
from core.build import builder, plan, source
from core.build.builder import build_index
from core.errors import SourceChangedError
from core.generations import layout_for

NOTES = {
    f"d{i % 4}/n{i:03d}.md": f"# Note {i}\n\nbody words of note {i}, see [[n{(i + 1) % 200:03d}]]\n" for i in range(200)
}
DAY = 86400


def aged(root: Path) -> Path:
    """Every file of the vault dated a day back."""
    old = time.time() - DAY
    for rel in NOTES:
        os.utime(root / rel, (old, old))
    return root


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = aged(write(tmp_path / "vault", NOTES))
    build_index(root)
    return root


def served(vault: Path) -> str:
    gen.clear_verify_cache()
    return gen.resolve(layout_for(vault)).generation_id


def append(root: Path, rel: str, text: str = "\nan appended line\n") -> None:
    with (root / rel).open("a", encoding="utf-8") as fh:
        fh.write(text)


def test_the_recheck_stats_only_the_files_the_build_read(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    append(vault, "d1/n005.md")
    calls: dict[str, int] = {"scan": 0, "stat": 0}
    inside: list[bool] = []
    real_scan, real_stat, real_lstat = source.scan_vault, os.stat, os.lstat
    real_check = source.WorkingTreeSource.check_unchanged

    def counting_scan(*a: Any, **kw: Any) -> Any:
        calls["scan"] += 1
        return real_scan(*a, **kw)

    def counting_stat(path: Any, *a: Any, **kw: Any) -> Any:
        if inside:
            calls["stat"] += 1
        return real_stat(path, *a, **kw)

    def counting_lstat(path: Any, *a: Any, **kw: Any) -> Any:
        if inside:
            calls["stat"] += 1
        return real_lstat(path, *a, **kw)

    def check(self: source.WorkingTreeSource, *a: Any, **kw: Any) -> None:
        inside.append(True)
        try:
            real_check(self, *a, **kw)
        finally:
            inside.clear()

    monkeypatch.setattr(source, "scan_vault", counting_scan)
    monkeypatch.setattr(os, "stat", counting_stat)
    monkeypatch.setattr(os, "lstat", counting_lstat)
    monkeypatch.setattr(source.WorkingTreeSource, "check_unchanged", check)
    report = build_index(vault)
    assert report.changed == 1 and report.reused == 199
    assert calls == {"scan": 1, "stat": 1}  # one walk (the plan's); the re-check: the edited note only


def test_a_removed_note_that_comes_back_during_the_build_fails_it(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = served(vault)
    text = (vault / "d2/n010.md").read_text(encoding="utf-8")
    (vault / "d2/n010.md").unlink()
    real_validate = builder._validate

    def validate_then_restore(conn: sqlite3.Connection, p: plan.BuildPlan) -> None:
        real_validate(conn, p)
        write(vault, {"d2/n010.md": text})

    monkeypatch.setattr(builder, "_validate", validate_then_restore)
    with pytest.raises(SourceChangedError) as caught:
        build_index(vault)
    assert caught.value.evidence["paths"] == ["d2/n010.md"]
    assert served(vault) == before


def test_a_note_changed_after_the_build_read_it_fails_the_build(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = served(vault)
    append(vault, "d1/n005.md")
    real_validate = builder._validate

    def validate_then_edit(conn: sqlite3.Connection, p: plan.BuildPlan) -> None:  # saved again, after the read
        real_validate(conn, p)
        append(vault, "d1/n005.md", "\nsaved again during the build\n")

    monkeypatch.setattr(builder, "_validate", validate_then_edit)
    with pytest.raises(SourceChangedError) as caught:
        build_index(vault)
    assert caught.value.reason == "source_changed" and caught.value.evidence["paths"] == ["d1/n005.md"]
    assert served(vault) == before
    monkeypatch.undo()
    assert build_index(vault).changed == 1  # both saves, read now


def test_a_note_carried_over_unread_that_changes_during_the_build_is_seen_by_the_next(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    append(vault, "d1/n005.md")
    scanned = os.stat(vault / "d3/n007.md")
    real_validate = builder._validate

    def validate_then_edit(conn: sqlite3.Connection, p: plan.BuildPlan) -> None:  # another note, never read
        real_validate(conn, p)
        append(vault, "d3/n007.md", "\nedited while the build ran, after its scan\n")

    monkeypatch.setattr(builder, "_validate", validate_then_edit)
    report = build_index(vault)  # published: the carried-over row says what the scan saw
    assert report.changed == 1 and served(vault) == report.generation_id
    conn = gen.connect_readonly(gen.resolve(layout_for(vault)))
    try:
        row = conn.execute("SELECT mtime_ns, size FROM notes WHERE rel_path = 'd3/n007.md'").fetchone()
    finally:
        conn.close()
    assert tuple(row) == (scanned.st_mtime_ns, scanned.st_size)  # its stat with it: never taken for the new text
    monkeypatch.undo()
    again = build_index(vault)
    assert again.changed == 1 and again.reused == 199  # the next build reads it


class _CountingConnection:
    """A connection whose queries' fetched rows are recorded with their SQL."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.fetched: list[tuple[str, int]] = []

    def execute(self, sql: str, *args: Any) -> list[Any]:
        rows = self.conn.execute(sql, *args).fetchall()
        self.fetched.append((sql, len(rows)))
        return rows


def test_the_plan_reads_whole_rows_only_of_the_files_it_does_not_vouch_for(vault: Path) -> None:
    append(vault, "d0/n004.md")
    os.unlink(vault / "d3/n003.md")
    write(vault, {"d3/new.md": "# New\n\nnew words\n"})
    src = source.WorkingTreeSource(vault, layout_for(vault).index_dir, 1 << 24)
    base = gen.resolve(layout_for(vault))
    conn = _CountingConnection(gen.connect_readonly(base))
    try:
        planned = plan.plan_build(src.scan(), time.time_ns(), conn, src)  # type: ignore[arg-type]
    finally:
        conn.conn.close()
    whole = sum(n for sql, n in conn.fetched if "content_sha256" in sql)
    assert whole == 2  # the edited note's row and the removed one's: not the 200 notes'
    assert [item[0].rel_path for item in planned.changed] == ["d0/n004.md", "d3/new.md"]
    assert len(planned.removed_ids) == 1 and planned.gone_paths == ["d3/n003.md"] and planned.reused == 198


def test_the_index_command_collects_garbage_less_often_during_the_build_only(
    vault: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import gc

    from core.cli import main

    seen: list[tuple[int, int, int]] = []
    real = builder.build_index

    def recording(*a: Any, **kw: Any) -> Any:
        seen.append(gc.get_threshold())
        return real(*a, **kw)

    monkeypatch.setattr(builder, "build_index", recording)
    append(vault, "d1/n005.md")
    before = (gc.get_threshold(), gc.get_freeze_count())
    assert main(["index", str(vault), "--json"]) == 0
    assert seen and seen[0][0] >= 50_000  # a tuple per file of the vault: not traversed every 700 allocations
    assert (gc.get_threshold(), gc.get_freeze_count()) == before  # an in-process caller gets its collector back
