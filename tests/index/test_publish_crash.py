"""Crash safety of publish: SIGKILL the publishing process at every step, then check what serves.

Each crash runs the real publish in a child process whose ``on_step`` hook kills itself at the
named step (each part step, each manifest step, the state commit, retention and the removal of
unreferenced parts). Afterwards exactly one verified generation is active (the previous one when the
kill came before the state commit, the new one after it, never a mixed one), and the next publish
succeeds and removes the debris the dead process left behind: only the manifests of ready generations
and the parts they list remain.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from core import generations as gen
from core.errors import IndexMissingError
from core.generations import (
    PUBLISH_STEPS,
    GenerationRecord,
    IndexLayout,
    active_record,
    build_lock,
    layout_for,
    list_generations,
    new_staging_path,
    publish,
    resolve,
    verify_full,
)

REPO = Path(__file__).resolve().parents[2]
COMMITTED_AT = PUBLISH_STEPS.index("state_commit") + 1  # steps from here on run after the pointer flip

CHILD = """
import os, signal, sys
from pathlib import Path
from core.generations import GenerationRecord, active_record, build_lock, layout_for, publish
layout = layout_for(Path(sys.argv[1]))
def hook(name):
    if name == sys.argv[2]:
        os.kill(os.getpid(), signal.SIGKILL)
record = GenerationRecord(source_snapshot_hash="child", notes=1, chunks=1, dense_chunks=0, chunker="c",
                          tokenizer="t", timings={}, problems=[])
with build_lock(layout):
    base = active_record(layout)
    publish(layout, Path(sys.argv[3]), record, expected_base=base["generation_id"] if base else None,
            on_step=hook, grace_s=0.0)
"""


def make_db(path: Path, letter: str) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
    conn.executemany("INSERT INTO t (body) VALUES (?)", [(letter * 200,) for _ in range(20)])
    conn.commit()
    conn.close()
    return path


def publish_db(layout: IndexLayout, letter: str, grace_s: float = 0.0) -> gen.ResolvedIndex:
    record = GenerationRecord(
        source_snapshot_hash="parent",
        notes=1,
        chunks=1,
        dense_chunks=0,
        chunker="c",
        tokenizer="t",
        timings={},
        problems=[],
    )
    with build_lock(layout):
        base = active_record(layout)
        staged = make_db(new_staging_path(layout), letter)
        return publish(layout, staged, record, expected_base=base["generation_id"] if base else None, grace_s=grace_s)


def stage(layout: IndexLayout, letter: str) -> Path:
    """A staged file made under the lock (as the builder does), handed to a child that relocks."""
    with build_lock(layout):
        return make_db(new_staging_path(layout), letter)


def run_child(layout: IndexLayout, step: str, staged: Path) -> int:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(layout.vault), step, str(staged)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    return proc.returncode


def assert_clean_after_next_publish(layout: IndexLayout, letter: str) -> None:
    """A following publish succeeds, serves verified, and leaves no debris behind."""
    newest = publish_db(layout, letter)
    gen.clear_verify_cache()
    assert resolve(layout).generation_id == newest.generation_id
    assert verify_full(layout)["orphans"] == []
    assert list(layout.staging_dir.iterdir()) == []
    assert_only_ready_files(layout)


def listed_parts(layout: IndexLayout, manifest_names: set[str]) -> set[str]:
    names = set()
    for name in manifest_names:
        doc = json.loads((layout.manifests_dir / name).read_bytes())
        names |= {f"{seg['sha256']}.seg" for seg in doc["segments"]}
    return names


def assert_only_ready_files(layout: IndexLayout) -> None:
    """The manifests of ready generations and the parts they list: nothing else."""
    ready = {row["file_name"] for row in list_generations(layout) if row["status"] == "ready"}
    assert {p.name for p in layout.manifests_dir.iterdir()} == ready
    assert {p.name for p in layout.segments_dir.iterdir()} == listed_parts(layout, ready)


@pytest.fixture
def layout(tmp_path: Path) -> IndexLayout:
    vault = tmp_path / "vault"
    vault.mkdir()
    gen.clear_verify_cache()
    return layout_for(vault)


@pytest.mark.parametrize("step", PUBLISH_STEPS)
def test_sigkill_at_each_step_keeps_a_verified_generation_active(layout: IndexLayout, step: str) -> None:
    first = publish_db(layout, "a")
    second = publish_db(layout, "b")
    staged = stage(layout, "c")
    staged_sha = hashlib.sha256(staged.read_bytes()).hexdigest()
    run_child(layout, step, staged)

    gen.clear_verify_cache()
    served = resolve(layout)
    if PUBLISH_STEPS.index(step) < COMMITTED_AT:
        assert served.generation_id == second.generation_id
        assert served.sha256 == second.sha256
    else:
        assert [p.sha256 for p in served.parts] == [staged_sha] and served.record["source_snapshot_hash"] == "child"
    report = verify_full(layout)
    assert report["generation_id"] == served.generation_id
    assert [p["sha256"] for p in report["parts"]] == [p.sha256 for p in served.parts]
    assert first.path.exists()  # the kill came before the removal of what only `first` needed
    assert_clean_after_next_publish(layout, "d")
    assert not first.path.exists() and not first.parts[0].path.exists()


@pytest.mark.parametrize("step", PUBLISH_STEPS[:COMMITTED_AT])
def test_sigkill_during_first_publish_leaves_no_index(layout: IndexLayout, step: str) -> None:
    staged = stage(layout, "a")
    run_child(layout, step, staged)
    assert not layout.state_path.exists()
    with pytest.raises(IndexMissingError):
        resolve(layout)
    assert_clean_after_next_publish(layout, "b")


@pytest.mark.parametrize("step", PUBLISH_STEPS)
def test_exception_at_each_step_cleans_up_in_process(layout: IndexLayout, step: str) -> None:
    previous = publish_db(layout, "a")
    staged = stage(layout, "b")

    def hook(name: str) -> None:
        if name == step:
            raise RuntimeError(f"injected at {name}")

    with build_lock(layout), pytest.raises(RuntimeError):
        publish(
            layout,
            staged,
            GenerationRecord("s", 1, 1, 0, "c", "t", {}, []),
            expected_base=previous.generation_id,
            on_step=hook,
        )
    served = resolve(layout)
    if PUBLISH_STEPS.index(step) < COMMITTED_AT:
        assert served.generation_id == previous.generation_id
        assert not staged.exists()
        assert [p.name for p in layout.manifests_dir.iterdir()] == [previous.path.name]
        assert [p.name for p in layout.segments_dir.iterdir()] == [previous.parts[0].path.name]
        assert list(layout.staging_dir.iterdir()) == []
    else:
        assert served.generation_id != previous.generation_id
    assert verify_full(layout)["generation_id"] == served.generation_id


HOT_JOURNAL_CHILD = """
import os, signal, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA cache_size = 1")
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE active SET generation_id = 'g20000101T000000-000000000000'")
for i in range(300):
    conn.execute("INSERT INTO generations VALUES (?, ?, 'x', 1, 's', 0, 0, 0, 'c', 't', NULL, '{}', '[]', 0, 'ready', NULL)",
                 (f"junk{i}", f"junk{i}" + "y" * 3000))
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_sigkill_inside_the_state_transaction_rolls_back(layout: IndexLayout) -> None:
    """A publisher that dies mid-transaction leaves a hot journal; readers roll it back and serve the old."""
    active = publish_db(layout, "a")
    proc = subprocess.run([sys.executable, "-c", HOT_JOURNAL_CHILD, str(layout.state_path)], timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert Path(f"{layout.state_path}-journal").exists()
    gen.clear_verify_cache()
    assert resolve(layout).generation_id == active.generation_id
    assert not Path(f"{layout.state_path}-journal").exists()
    assert [row["generation_id"] for row in list_generations(layout)] == [active.generation_id]
    assert_clean_after_next_publish(layout, "b")
