"""Issue 11: the state DB and disk faults give typed errors, and a build recovers what can be recovered.

- A corrupt ``state.db`` fails readers closed until the next build, which moves it aside
  (reported as ``state_recovered``) and publishes a fresh index.
- A lock held on ``state.db`` is ``index_busy``, not corruption.
- A generation removed between verify and open is ``missing`` (typed), not an sqlite3 error.
- An ``--in-place`` build killed inside its transaction leaves ``legacy_interrupted`` for
  readers until the next build rolls it back.
- ENOSPC / EACCES / EROFS / EFBIG at each build and publish step: ``build_io_failed``
  (exit 6), the previous generation keeps serving and staging is clean. One ``ulimit -f``
  case is real (a child process with RLIMIT_FSIZE); the others are injected by wrapping the
  os/shutil/SQLite calls at that step.
"""

from __future__ import annotations

import errno
import os
import resource
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import write_files

from core import generations as gen
from core.build import delta_stage, incremental, ingest
from core.build.builder import build_index
from core.errors import VaultSearchError
from core.generations import PUBLISH_STEPS
from core.index import state as gstate
from core.index.status import index_status
from core.searcher import search_vault

REPO = Path(__file__).resolve().parents[2]
NOTES = {f"n{i}.md": f"---\ntitle: Note {i}\n---\n# Note {i}\n\nquasar body {i}\n" for i in range(5)}


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    gen.clear_verify_cache()
    root = write_files(tmp_path / "vault", NOTES)
    build_index(root)
    return root


def served(vault: Path) -> str | None:
    gen.clear_verify_cache()
    return gen.verify_full(gen.layout_for(vault))["generation_id"]


def staging(vault: Path) -> list[str]:
    return sorted(os.listdir(gen.layout_for(vault).staging_dir))


def reason_of(call) -> str:  # noqa: ANN001
    with pytest.raises(VaultSearchError) as info:
        call()
    return info.value.reason


# --- the state database ------------------------------------------------------------------------------------


def test_a_corrupt_state_db_fails_readers_closed_and_the_next_build_recovers(vault: Path) -> None:
    layout = gen.layout_for(vault)
    layout.state_path.write_bytes(b"this is not a database" * 100)
    gen.clear_verify_cache()
    assert reason_of(lambda: search_vault(vault, "quasar")) == "state_corrupt"
    report = build_index(vault)
    assert {(p["path"], p["reason"]) for p in report.problems} == {("state.db", "state_recovered")}
    assert len(search_vault(vault, "quasar")) == 5
    assert served(vault) == report.generation_id
    assert [p.name for p in layout.index_dir.glob("state.db.corrupt-*")]  # kept aside as evidence
    assert len(os.listdir(layout.segments_dir)) == len(os.listdir(layout.manifests_dir)) == 1  # the old one reaped


def test_a_state_db_of_another_schema_is_recovered_by_a_build(vault: Path) -> None:
    layout = gen.layout_for(vault)
    conn = sqlite3.connect(layout.state_path)
    conn.execute("UPDATE meta SET value = '1' WHERE key = 'state_schema_version'")
    conn.commit()
    conn.close()
    gen.clear_verify_cache()
    assert reason_of(lambda: search_vault(vault, "quasar")) == "schema_mismatch"
    assert build_index(vault).problems[0]["reason"] == "state_recovered"
    assert len(search_vault(vault, "quasar")) == 5


def test_an_index_of_the_one_file_format_is_rebuilt_whole_and_the_report_says_why(vault: Path) -> None:
    """An index directory written before manifests (state schema 2, one ``generations/<gid>.db`` per
    generation): readers get the typed schema mismatch that says to rebuild, and ``vaultsearch index``
    rebuilds every note, saying why, and removes the old format's files."""
    layout = gen.layout_for(vault)
    conn = sqlite3.connect(layout.state_path)
    conn.execute("UPDATE meta SET value = '2' WHERE key = 'state_schema_version'")
    conn.commit()
    conn.close()
    layout.generations_dir.mkdir()
    old_file = layout.generations_dir / "g20260101T000000-0123456789ab.db"
    old_file.write_bytes(b"an old one-file generation")
    gen.clear_verify_cache()
    with pytest.raises(VaultSearchError) as info:
        search_vault(vault, "quasar")
    assert info.value.reason == "schema_mismatch" and "vaultsearch index" in (info.value.hint or "")
    assert "one-file generations" in info.value.message
    report = build_index(vault)
    assert report.full_rebuild_reason == "index_format_changed"
    assert "replaced by manifests of segments" in (report.full_rebuild_detail or "")
    assert report.added == report.notes == 5
    assert [p["reason"] for p in report.problems] == ["state_recovered"]
    assert not old_file.exists()
    assert len(search_vault(vault, "quasar")) == 5


def test_a_lock_held_on_state_db_is_busy_not_corrupt(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gstate, "STATE_TIMEOUT_S", 0.2)
    layout = gen.layout_for(vault)
    holder = sqlite3.connect(layout.state_path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        gen.clear_verify_cache()
        assert reason_of(lambda: gen.resolve(layout)) == "index_busy"
        assert reason_of(lambda: build_index(vault)) == "index_busy"  # and the build does not "recover" it
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert layout.state_path.exists() and not list(layout.index_dir.glob("state.db.corrupt-*"))
    assert len(search_vault(vault, "quasar")) == 5


def test_a_generation_removed_between_verify_and_open_is_typed(vault: Path) -> None:
    resolved = gen.resolve(gen.layout_for(vault))
    resolved.parts[0].path.unlink()
    # the verified inode is no longer the file at its path: typed, never an sqlite3 error
    assert reason_of(lambda: gen.connect_readonly(resolved)) == "generation_changed"


KILL_IN_PLACE = """
import os, signal, sys
from pathlib import Path
import core.build.builder as b
real_open, real_edges = b._open_working, b.recompute_edges
def small_cache(path, *, in_place):
    conn = real_open(path, in_place=in_place)
    conn.execute("PRAGMA cache_size=5")  # spill pages to index.db inside the transaction
    return conn
def edges_then_die(*a, **k):
    real_edges(*a, **k)
    os.kill(os.getpid(), signal.SIGKILL)
b._open_working, b.recompute_edges = small_cache, edges_then_die
b.build_index(Path(sys.argv[1]), in_place=True, workers=1)
"""


def test_an_in_place_build_killed_inside_its_transaction_is_typed_then_recovered(tmp_path: Path) -> None:
    vault = write_files(tmp_path / "vault", NOTES)
    build_index(vault, in_place=True)
    write_files(vault, {f"more/m{i}.md": f"# M {i}\n\n" + " ".join(f"w{i}x{j}" for j in range(80)) for i in range(60)})
    proc = subprocess.run(
        [sys.executable, "-c", KILL_IN_PLACE, str(vault)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL
    assert Path(f"{gen.layout_for(vault).legacy_path}-journal").exists()
    gen.clear_verify_cache()
    assert reason_of(lambda: search_vault(vault, "quasar")) == "legacy_interrupted"
    assert reason_of(lambda: index_status(vault)) == "legacy_interrupted"
    report = build_index(vault, in_place=True)  # opens index.db for writing: SQLite rolls the journal back
    assert report.notes == 65
    assert len(search_vault(vault, "quasar", limit=100)) == 5


# --- disk faults at each build and publish step ------------------------------------------------------------

FAULTS = {"ENOSPC": errno.ENOSPC, "EACCES": errno.EACCES, "EROFS": errno.EROFS, "EFBIG": errno.EFBIG}


def _oserror(name: str) -> OSError:
    return OSError(FAULTS[name], os.strerror(FAULTS[name]))


COMMIT = PUBLISH_STEPS.index("state_commit")
BEFORE_FLIP = ["read_base", "write_rows", *PUBLISH_STEPS[: COMMIT + 1]]
# every step with one of the faults in turn, and every fault at the first read of the base and at the state commit
CASES = sorted(
    {(step, sorted(FAULTS)[i % len(FAULTS)]) for i, step in enumerate(BEFORE_FLIP)}
    | {(step, fault) for step in ("read_base", "state_commit") for fault in FAULTS}
)


@pytest.mark.parametrize(("step", "fault"), CASES)
def test_a_disk_fault_before_the_flip_is_typed_and_the_old_generation_serves(
    vault: Path, monkeypatch: pytest.MonkeyPatch, fault: str, step: str
) -> None:
    before = served(vault)
    write_files(vault, {"n9.md": "# Nine\n\nquasar new note\n"})
    on_step = None
    if step == "read_base":

        def copy_fails(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            raise _oserror(fault)

        monkeypatch.setattr(incremental, "copy_base", copy_fails)  # the hashed copy of the base (core.index.verify)
        monkeypatch.setattr(delta_stage, "_copy_generation_tables", copy_fails)  # a build staged on its changes
    elif step == "write_rows":
        real_flush = ingest.NoteWriter.flush

        def flush_fails(self):  # noqa: ANN001, ANN202
            real_flush(self)
            error = sqlite3.OperationalError("database or disk is full")
            error.sqlite_errorcode, error.sqlite_errorname = 13, "SQLITE_FULL"
            raise error

        monkeypatch.setattr(ingest.NoteWriter, "flush", flush_fails)
    else:

        def on_step(name: str) -> None:
            if name == step:
                raise _oserror(fault)

    with pytest.raises(VaultSearchError) as info:
        build_index(vault, on_step=on_step)
    assert (info.value.reason, info.value.exit_code) == ("build_io_failed", 6)
    monkeypatch.undo()
    assert served(vault) == before and staging(vault) == []
    assert len(search_vault(vault, "quasar")) == 5
    assert build_index(vault).added == 1  # and the next build goes through


@pytest.mark.parametrize("step", PUBLISH_STEPS[COMMIT + 1 :])
def test_a_disk_fault_after_the_flip_is_typed_and_the_new_generation_serves(vault: Path, step: str) -> None:
    write_files(vault, {"n9.md": "# Nine\n\nquasar new note\n"})

    def on_step(name: str) -> None:
        if name == step:
            raise _oserror("EROFS")

    with pytest.raises(VaultSearchError) as info:
        build_index(vault, on_step=on_step)
    assert info.value.reason == "build_io_failed"
    assert served(vault) is not None and len(search_vault(vault, "quasar")) == 6


def test_a_read_only_index_dir_is_a_typed_error(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """EROFS from the filesystem (simulated at the build lock, the first write of a build)."""
    real_open = os.open
    lock = str(gen.layout_for(vault).lock_path)

    def read_only(path, flags, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if os.fspath(path) == lock and flags & (os.O_WRONLY | os.O_RDWR):
            raise OSError(errno.EROFS, "Read-only file system", lock)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    assert reason_of(lambda: build_index(vault)) in {"index_dir_inaccessible", "build_io_failed"}


def test_a_chmod_000_index_dir_is_a_typed_error_for_builders_and_readers(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index_dir = gen.layout_for(vault).index_dir
    index_dir.chmod(0)
    try:
        if os.geteuid() == 0:  # root may list and write it anyway: refuse it as the kernel would a user
            real_listdir, real_access = os.listdir, os.access

            def listdir(path=".", *a):  # noqa: ANN001, ANN002, ANN202
                if Path(path) == index_dir:
                    raise PermissionError(errno.EACCES, "Permission denied", str(path))
                return real_listdir(path, *a)

            def access(path, mode, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
                return False if Path(path) == index_dir else real_access(path, mode, *a, **k)

            monkeypatch.setattr(os, "listdir", listdir)
            monkeypatch.setattr(os, "access", access)
        assert reason_of(lambda: build_index(vault)) == "index_dir_inaccessible"
        gen.clear_verify_cache()
        assert reason_of(lambda: search_vault(vault, "quasar")) == "index_dir_inaccessible"
        assert reason_of(lambda: index_status(vault)) == "index_dir_inaccessible"
    finally:
        index_dir.chmod(0o755)


ULIMITED = """
import sys
from pathlib import Path
from core.cli import main
sys.exit(main(["index", sys.argv[1], "--json"]))
"""


def test_ulimit_f_during_a_build_is_typed_and_keeps_the_old_generation(vault: Path) -> None:
    before = served(vault)
    write_files(vault, {f"big/b{i}.md": f"# B {i}\n\n" + "quasar words " * 400 for i in range(40)})
    limit = gen.resolve(gen.layout_for(vault)).size + 4096  # the base copy fits, the grown index does not

    def limit_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run(
        [sys.executable, "-c", ULIMITED, str(vault)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit_file_size,
    )
    assert proc.returncode == 6, proc.stderr
    assert '"build_io_failed"' in proc.stderr
    assert served(vault) == before and staging(vault) == []


@pytest.mark.slow
def test_a_live_in_place_writer_holding_index_db_is_busy_not_interrupted(tmp_path: Path) -> None:
    """A reader meeting a writer's exclusive lock on index.db waits SQLite's busy timeout (5 s), then
    gets ``index_busy``: a live build is not an interrupted one."""
    vault = write_files(tmp_path / "vault", NOTES)
    build_index(vault, in_place=True)
    writer = sqlite3.connect(gen.layout_for(vault).legacy_path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=DELETE")
    writer.execute("BEGIN EXCLUSIVE")
    try:
        gen.clear_verify_cache()
        assert reason_of(lambda: search_vault(vault, "quasar")) == "index_busy"
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert len(search_vault(vault, "quasar")) == 5
