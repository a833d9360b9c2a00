"""Issue 11, "bad input stops or hangs the build": every case is a reported problem, never an abort or a hang.

Faults are injected by wrapping collaborators of the builder (never the builder itself). A
``hang_guard`` turns a build that would block forever (the old behaviour on a FIFO) into a
test failure after a generous bound instead of a hung suite; it asserts nothing about speed.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import with_working, write_files

from core import generations as gen
from core.build import apply, bounds, builder
from core.build.builder import build_index
from core.errors import VaultSearchError
from core.index.status import index_status
from core.searcher import search_vault

REPO = Path(__file__).resolve().parents[2]
NOTES = {f"n{i}.md": f"---\ntitle: Note {i}\n---\n# Note {i}\n\nquasar body {i}\n" for i in range(4)}


class Hung(Exception):
    pass


@pytest.fixture
def hang_guard() -> Iterator[None]:
    def alarm(signum: int, frame: object) -> None:
        raise Hung("the build blocked")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(30)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    gen.clear_verify_cache()
    return write_files(tmp_path / "vault", NOTES)


def problems(report: builder.BuildReport) -> dict[str, str]:
    return {p["path"]: p["reason"] for p in report.problems}


def deny_reading(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """chmod 000; as root (who may read it anyway) also make opening it fail with EACCES, as for a user."""
    path.chmod(0)
    if os.geteuid() == 0:
        real_open = os.open

        def open_denied(file, flags, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            if os.path.realpath(file) == str(path.resolve()):
                raise PermissionError(errno.EACCES, "Permission denied", str(file))
            return real_open(file, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", open_denied)
        monkeypatch.setattr("builtins.open", _denying_builtin_open(path))


def _denying_builtin_open(path: Path):  # noqa: ANN202
    import builtins

    real = builtins.open

    def fake(file, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if isinstance(file, (str, os.PathLike)) and os.path.realpath(file) == str(path.resolve()):
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return real(file, *args, **kwargs)

    return fake


def test_an_unreadable_note_is_a_reported_problem_not_an_abort(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deny_reading(monkeypatch, vault / "n1.md")
    report = build_index(vault)
    assert problems(report) == {"n1.md": "unreadable"}
    assert report.notes == 3
    assert sorted(r.rel_path for r in search_vault(vault, "quasar")) == ["n0.md", "n2.md", "n3.md"]
    monkeypatch.undo()
    (vault / "n1.md").chmod(0o644)
    again = build_index(vault)  # readable again: picked up by the next build
    assert again.notes == 4 and problems(again) == {}


def test_an_unreadable_note_in_a_worker_build_is_reported(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_files(vault, {f"many/m{i}.md": f"# M {i}\n\nbody {i}\n" for i in range(40)})
    deny_reading(monkeypatch, vault / "many" / "m7.md")
    report = build_index(vault, workers=2)
    assert problems(report) == {"many/m7.md": "unreadable"} and report.notes == 43


def test_a_note_replaced_by_a_fifo_between_scan_and_read_never_blocks(
    vault: Path, monkeypatch: pytest.MonkeyPatch, hang_guard: None
) -> None:
    real = apply.prepared_notes

    def swap_then_prepare(items, **kw):  # noqa: ANN001, ANN003, ANN202
        (vault / "n2.md").unlink()
        os.mkfifo(vault / "n2.md")
        return real(items, **kw)

    monkeypatch.setattr(apply, "prepared_notes", swap_then_prepare)
    with pytest.raises(VaultSearchError) as info:  # the vault changed under the build: typed, nothing published
        build_index(vault)
    assert info.value.reason == "source_changed"
    monkeypatch.undo()
    report = build_index(vault)  # the next build sees the FIFO at scan and reports it
    assert problems(report) == {"n2.md": "not_regular_file"} and report.notes == 3


def test_a_fifo_named_like_a_note_is_reported_at_scan(vault: Path, hang_guard: None) -> None:
    os.mkfifo(vault / "pipe.md")
    report = build_index(vault)
    assert problems(report) == {"pipe.md": "not_regular_file"} and report.notes == 4


def test_a_fifo_vaultsearchignore_hangs_neither_index_nor_status(vault: Path, hang_guard: None) -> None:
    os.mkfifo(vault / ".vaultsearchignore")
    report = build_index(vault)
    assert problems(report) == {".vaultsearchignore": "not_regular_file"} and report.notes == 4
    assert index_status(vault)["notes"] == 4


def test_a_vaultsearchignore_symlinked_out_of_the_vault_is_not_read(vault: Path, tmp_path: Path) -> None:
    outside = write_files(tmp_path / "outside", {"rules": "*.md\nsecret-line-[\n"}) / "rules"
    (vault / ".vaultsearchignore").symlink_to(outside)
    report = build_index(vault)
    assert report.notes == 4  # its "*.md" did not apply
    assert problems(report) == {".vaultsearchignore": "symlink_outside_vault"}
    assert "secret-line" not in repr(report.to_dict())


def test_a_symlink_flipped_out_of_the_vault_during_the_build_is_not_read(
    vault: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scan sees link.md -> inside.md; just before the read it points outside; after, back inside."""
    outside = write_files(tmp_path / "outside", {"private.md": "# Private\n\nzanzibar outside words\n"})
    write_files(vault, {"inside.md": "# Inside\n\nzanzibar inside words\n"})
    link = vault / "link.md"
    link.symlink_to(vault / "inside.md")

    def point(target: Path) -> None:
        tmp = vault / ".link.tmp"
        tmp.symlink_to(target)
        os.replace(tmp, link)

    # equal size and mtime, so that the scan after the build cannot tell the two targets apart
    os.utime(outside / "private.md", ns=(1, 1))
    os.utime(vault / "inside.md", ns=(1, 1))
    real = apply.prepared_notes

    @contextmanager
    def flip_during_read(items, **kw):  # noqa: ANN001, ANN003, ANN202
        point(outside / "private.md")
        with real(items, **kw) as batches:
            done = list(batches)
        point(vault / "inside.md")
        yield iter(done)

    monkeypatch.setattr(apply, "prepared_notes", flip_during_read)
    report = build_index(vault)
    assert problems(report) == {"link.md": "symlink_outside_vault"}
    monkeypatch.undo()
    assert [r.rel_path for r in search_vault(vault, "zanzibar outside")] == ["inside.md"]
    assert "outside words" not in repr([r.to_dict() for r in search_vault(vault, "zanzibar")])


def test_one_note_with_too_many_distinct_words_is_bounded_and_reported(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bounds, "MAX_NOTE_WORDS", 500)
    words = " ".join(f"w{i:05d}x" for i in range(5000))
    write_files(vault, {"huge.md": f"# Huge\n\n{words}\n"})
    report = build_index(vault)
    assert problems(report) == {"huge.md": "vocabulary_truncated"}
    conn = with_working(gen.connect_readonly(gen.resolve(gen.layout_for(vault))))
    try:
        terms = conn.execute("SELECT count(*) FROM terms WHERE term GLOB '*:w[0-9]*x'").fetchone()[0]
    finally:
        conn.close()
    assert 0 < terms <= 500
    assert [r.rel_path for r in search_vault(vault, "w00001x")] == ["huge.md"]  # its start is still indexed
    assert list(search_vault(vault, "w04999x")) == []


# --- a killed builder leaves no orphan worker holding build.lock ------------------------------------------

ORPHAN = """
import os, sys, signal, time
from pathlib import Path
import core.build.ingest
from core.build.builder import build_index
real = core.build.ingest.prepare_notes
def kill_builder_then_block(items, **kw):
    with open(sys.argv[2], "a") as f:
        f.write(f"{os.getpid()}\\n")
    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(120)  # a worker stuck (e.g. on a FIFO) when its builder dies
    return real(items, **kw)
core.build.ingest.prepare_notes = kill_builder_then_block
build_index(Path(sys.argv[1]), workers=2)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"))


def test_a_killed_builder_leaves_no_worker_holding_the_lock(vault: Path, tmp_path: Path) -> None:
    write_files(vault, {f"w/{i}.md": f"# W {i}\n\nbody {i}\n" for i in range(200)})
    pids = tmp_path / "pids"
    proc = subprocess.run(
        [sys.executable, "-c", ORPHAN, str(vault), str(pids)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == -signal.SIGKILL
    report = build_index(vault, wait_seconds=10.0)  # the lock is free: no orphan holds it
    assert report.notes == 204
    workers = [int(p) for p in pids.read_text().split()]
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in workers)  # they died with their parent


def test_a_note_grown_past_the_size_limit_after_the_scan_is_not_read_whole(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan excludes a note over ``max_note_bytes``; one that grows past it between the scan and
    its read is refused having read at most the limit + 1 bytes (it was read whole: a note grown to
    1 GiB cost the build 1 GiB), and nothing half-read is published."""
    from core.index.settings import IndexConfig
    from core.vault import scan

    limit = 4096
    read_sizes: list[int] = []
    real_read, real_prepare = scan.read_file, apply.prepared_notes

    def counting_read(path, **kw):  # noqa: ANN001, ANN003, ANN202
        data, sha = real_read(path, **kw)
        read_sizes.append(len(data))
        return data, sha

    def grow_then_prepare(items, **kw):  # noqa: ANN001, ANN003, ANN202
        (vault / "n2.md").write_text("# grown\n" + "word " * (4 * limit))
        return real_prepare(items, **kw)

    monkeypatch.setattr(apply, "prepared_notes", grow_then_prepare)
    monkeypatch.setattr("core.build.ingest.read_file", counting_read)
    with pytest.raises(VaultSearchError) as info:
        build_index(vault, config=IndexConfig(max_note_bytes=limit), workers=1)
    assert info.value.reason == "source_changed"
    assert read_sizes and max(read_sizes) <= limit
    monkeypatch.undo()
    report = build_index(vault, config=IndexConfig(max_note_bytes=limit))  # the next scan says why
    assert problems(report) == {"n2.md": "too_large"}
