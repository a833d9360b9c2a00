"""A real build that fails, dies or races another one never leaves a broken or half-new index.

- The source changes during a build: ``SourceChangedError`` and the old index keeps serving.
- A build process is SIGKILLed at every publish step (through ``build_index``'s ``on_step``):
  exactly one verified generation serves afterwards, the old one unless the state commit ran.
- A build process is SIGKILLed while its forked workers are parsing: the workers exit too, so
  the build lock they inherited is released.
- Two builder processes at once: the second fails with ``build_locked``, or waits its turn.

The builder is never mocked: faults are injected by wrapping collaborators it calls.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import write_files as write

from core import generations as gen
from core.build import apply, builder
from core.build.builder import IndexConfig, build_index
from core.errors import BuildLockedError, IndexMissingError, SourceChangedError
from core.generations import PUBLISH_STEPS, layout_for, list_generations

REPO = Path(__file__).resolve().parents[2]
COMMITTED_AT = PUBLISH_STEPS.index("state_commit") + 1  # a kill at this step or later comes after the flip

# A builder process: rebuilds argv[1]; at publish step argv[2] it either kills itself (kill) or says
# "holding" and waits for a line on stdin (hold: the first time only, since a delta publish passes each
# part step once per part). argv[3] is the number of parse workers.
CHILD = """
import os, signal, sys
from pathlib import Path
from core.build.builder import build_index
from core.errors import BuildLockedError
vault, at, action, workers = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
held = []
def hook(name):
    if name == at and action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if name == at and action == "hold" and not held:
        held.append(name)
        print("holding", flush=True)
        sys.stdin.readline()
print(build_index(vault, on_step=hook, workers=workers).generation_id, flush=True)
"""

# A builder whose forked parse workers kill it mid-build.
KILLED_BY_WORKER = """
import os, signal, sys
from pathlib import Path
import core.build.ingest
from core.build.builder import build_index
real = core.build.ingest.prepare_notes
def prepare_then_kill_the_builder(items, **kw):
    os.kill(os.getppid(), signal.SIGKILL)
    return real(items, **kw)
core.build.ingest.prepare_notes = prepare_then_kill_the_builder
build_index(Path(sys.argv[1]), workers=2)
"""

NOTES = {
    f"note{i}.md": f"---\ntitle: Note {i}\n---\n# Note {i}\n\nbody words {i} [[note{(i + 1) % 6}]]\n" for i in range(6)
}


def child(script: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        cwd=REPO,
        env=env,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = write(tmp_path / "vault", NOTES)
    build_index(root)
    return root


def served(vault: Path) -> str:
    """The generation id that serves, after an uncached full verification."""
    gen.clear_verify_cache()
    layout = layout_for(vault)
    checked = gen.verify_full(layout)
    assert gen.resolve(layout).generation_id == checked["generation_id"]
    return checked["generation_id"]


def leftovers(vault: Path) -> list[Path]:
    layout = layout_for(vault)
    return sorted(layout.staging_dir.iterdir())


# --- the source changes during a build -------------------------------------------------------------------


@pytest.mark.parametrize("in_place", [False, True], ids=["generation", "in_place"])
def test_a_file_edited_during_the_build_fails_it_and_the_old_index_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_place: bool
) -> None:
    root = write(tmp_path / "vault", NOTES)
    build_index(root, in_place=in_place)
    layout = layout_for(root)
    before = gen.resolve(layout)
    index_bytes = before.path.read_bytes()
    write(root, {"note1.md": "# Note 1\n\nedited before the build\n"})
    real_validate = builder._validate

    def validate_then_edit(conn, scan):  # the user saves a note while the build checks its DB
        real_validate(conn, scan)
        write(root, {"note2.md": "# Note 2\n\nedited during the build, longer than before\n"})

    monkeypatch.setattr(builder, "_validate", validate_then_edit)
    with pytest.raises(SourceChangedError) as caught:
        build_index(root, in_place=in_place)
    assert caught.value.reason == "source_changed" and caught.value.evidence["paths"] == ["note2.md"]
    monkeypatch.undo()
    gen.clear_verify_cache()
    after = gen.resolve(layout)
    assert (after.kind, after.generation_id, after.path.read_bytes()) == (
        before.kind,
        before.generation_id,
        index_bytes,
    )
    assert leftovers(root) == [] and len(list_generations(layout)) == (0 if in_place else 1)
    assert build_index(root, in_place=in_place).changed == 2  # the next build picks both edits up


def test_a_build_that_may_see_the_source_change_publishes_what_it_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write(tmp_path / "vault", NOTES)
    build_index(root)
    write(root, {"note1.md": "# Note 1\n\nedited before the build\n"})
    real_validate = builder._validate

    def validate_then_edit(conn, scan):  # the user saves a note while the watcher's build runs
        real_validate(conn, scan)
        write(root, {"note2.md": "# Note 2\n\nedited during the build, longer than before\n"})

    monkeypatch.setattr(builder, "_validate", validate_then_edit)
    report = build_index(root, source_may_change=True)  # the watcher: note2.md is pending, built next
    assert not report.up_to_date and report.changed == 1
    monkeypatch.undo()
    again = build_index(root)
    assert again.changed == 1 and again.generation_id != report.generation_id  # note2.md, now


def test_a_file_deleted_before_it_is_read_is_source_changed(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(vault, {"late.md": "# Late\n"})
    before = served(vault)
    real = apply.prepared_notes

    def delete_then_prepare(items, **kw):  # gone between the scan and the read
        (vault / "late.md").unlink()
        return real(items, **kw)

    monkeypatch.setattr(apply, "prepared_notes", delete_then_prepare)
    with pytest.raises(SourceChangedError) as caught:
        build_index(vault)
    assert caught.value.evidence["paths"] == ["late.md"]
    assert served(vault) == before and leftovers(vault) == []


# --- SIGKILL at every publish step of a real build ----------------------------------------------------------


@pytest.mark.parametrize("step", PUBLISH_STEPS)
def test_a_build_killed_at_any_publish_step_leaves_one_verified_generation(vault: Path, step: str) -> None:
    old = served(vault)
    write(vault, {"note3.md": "# Note 3\n\nchanged before the killed build\n"})
    proc = child(CHILD, str(vault), step, "kill", "1")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL, err
    now = served(vault)
    if PUBLISH_STEPS.index(step) < COMMITTED_AT:
        assert now == old
    else:
        assert now != old
    report = build_index(vault, wait_seconds=10)  # the lock died with the process
    assert report.up_to_date == (now != old)
    assert served(vault) == (report.generation_id if now == old else now)
    assert leftovers(vault) == []


def test_a_builder_killed_while_its_workers_parse_does_not_leave_the_lock_held(vault: Path) -> None:
    old = served(vault)
    write(vault, {f"extra{i}.md": f"# Extra {i}\n\nmore words\n" for i in range(200)})
    proc = child(KILLED_BY_WORKER, str(vault))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL, err
    started = time.monotonic()
    report = build_index(vault, wait_seconds=20)  # the workers inherited the lock file: they must exit
    assert time.monotonic() - started < 20
    assert report.added == 200 and served(vault) == report.generation_id != old


# --- two builders at once ------------------------------------------------------------------------------------


def test_a_second_builder_fails_build_locked_or_waits_its_turn(vault: Path) -> None:
    old = served(vault)
    write(vault, {"note4.md": "# Note 4\n\nchanged for the first builder\n"})
    first = child(CHILD, str(vault), "part_integrity_check", "hold", "1")
    assert first.stdout is not None and first.stdout.readline().strip() == "holding"
    try:
        with pytest.raises(BuildLockedError) as caught:
            build_index(vault)
        assert caught.value.reason == "build_locked"
        assert caught.value.evidence["holder_pid"] == str(first.pid)
        release = threading.Timer(0.3, lambda: (first.stdin.write("\n"), first.stdin.flush()))
        release.start()
        waited = build_index(vault, wait_seconds=60)  # blocks until the first one has published
        release.join()
    finally:
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    published = out.strip()
    assert published != old and waited.up_to_date and waited.generation_id == published
    assert served(vault) == published
    assert [g["generation_id"] for g in list_generations(layout_for(vault))] == [published, old]


@pytest.mark.parametrize("first_build", [True, False], ids=["first_build", "identity_change"])
def test_a_failed_from_scratch_in_place_build_leaves_no_half_built_index_db(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first_build: bool
) -> None:
    root = write(tmp_path / "vault", NOTES)
    layout = layout_for(root)
    if not first_build:
        build_index(root, in_place=True)
    before = layout.legacy_path.read_bytes() if not first_build else None
    real_validate = builder._validate

    def validate_then_edit(conn, scan):
        real_validate(conn, scan)
        write(root, {"note2.md": "# Note 2\n\nedited during the build, longer than before\n"})

    monkeypatch.setattr(builder, "_validate", validate_then_edit)
    with pytest.raises(SourceChangedError):
        build_index(root, in_place=True, config=IndexConfig(chunk_size=300, chunk_overlap=30))
    monkeypatch.undo()
    assert not layout.legacy_path.with_name("index.db.building").exists()
    if first_build:
        assert not layout.legacy_path.exists()
        with pytest.raises(IndexMissingError):
            gen.resolve(layout)
    else:
        assert layout.legacy_path.read_bytes() == before  # the old index still serves, untouched
