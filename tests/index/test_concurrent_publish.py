"""Two builders at once: the build lock lets one win and the other fail cleanly; the compare-and-swap
on the active pointer catches a build that started from a generation that is no longer active."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from core import generations as gen
from core.errors import BuildLockedError
from core.generations import (
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

# A builder process: takes the lock, says so, stages a database (optionally waiting for "go" on stdin
# first), then publishes it, as the real builder does.
BUILDER = """
import sqlite3, sys
from pathlib import Path
from core.errors import BuildLockedError
from core.generations import GenerationRecord, active_record, build_lock, layout_for, new_staging_path, publish
layout, letter, tag, wait, mode = layout_for(Path(sys.argv[1])), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
record = GenerationRecord(source_snapshot_hash=tag, notes=1, chunks=1, dense_chunks=0, chunker="c",
                          tokenizer="t", timings={}, problems=[])
try:
    with build_lock(layout, wait_seconds=float(wait)):
        print("locked", flush=True)
        if mode == "hold":
            sys.stdin.readline()
        staged = new_staging_path(layout)
        conn = sqlite3.connect(staged)
        conn.execute("CREATE TABLE t (body TEXT)")
        conn.executemany("INSERT INTO t VALUES (?)", [(letter * 200,)] * 20)
        conn.commit()
        conn.close()
        base = active_record(layout)
        print(publish(layout, staged, record, expected_base=base["generation_id"] if base else None)
              .generation_id, flush=True)
except BuildLockedError as exc:
    print(exc.reason, exc.evidence["lock"], flush=True)
    sys.exit(3)
"""


def make_db(path: Path, letter: str) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
    conn.executemany("INSERT INTO t (body) VALUES (?)", [(letter * 200,) for _ in range(20)])
    conn.commit()
    conn.close()
    return path


def record(tag: str = "parent") -> GenerationRecord:
    return GenerationRecord(
        source_snapshot_hash=tag, notes=1, chunks=1, dense_chunks=0, chunker="c", tokenizer="t", timings={}, problems=[]
    )


def publish_db(layout: IndexLayout, letter: str) -> gen.ResolvedIndex:
    with build_lock(layout):
        base = active_record(layout)
        return publish(
            layout,
            make_db(new_staging_path(layout), letter),
            record(),
            expected_base=base["generation_id"] if base else None,
        )


def start_builder(layout: IndexLayout, letter: str, tag: str, *, wait: float, hold: bool) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", BUILDER, str(layout.vault), letter, tag, str(wait), "hold" if hold else "run"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def layout(tmp_path: Path) -> IndexLayout:
    vault = tmp_path / "vault"
    vault.mkdir()
    gen.clear_verify_cache()
    return layout_for(vault)


def test_second_lock_in_process_is_refused_with_reason(layout: IndexLayout) -> None:
    with build_lock(layout):
        for wait in (0.0, 0.1):
            with pytest.raises(BuildLockedError) as info, build_lock(layout, wait_seconds=wait):
                pass
            assert info.value.reason == "build_locked"
            assert info.value.evidence["lock"] == str(layout.lock_path)
            assert info.value.evidence["holder_pid"] == str(os.getpid())
    with build_lock(layout):  # released on exit
        pass


def test_two_processes_one_wins_the_other_fails_cleanly(layout: IndexLayout) -> None:
    base = publish_db(layout, "a")
    winner = start_builder(layout, "b", "winner", wait=0.0, hold=True)
    try:
        assert winner.stdout.readline().strip() == "locked"
        loser = start_builder(layout, "c", "loser", wait=0.0, hold=False)
        out, err = loser.communicate(timeout=60)
        assert loser.returncode == 3, err
        assert out.split() == ["build_locked", str(layout.lock_path)]
        assert resolve(layout).generation_id == base.generation_id  # nothing changed meanwhile
        out, err = winner.communicate("go\n", timeout=60)
    finally:
        winner.kill()
    assert winner.returncode == 0, err
    published = out.split()[-1]
    gen.clear_verify_cache()
    served = resolve(layout)
    assert served.generation_id == published and served.record["source_snapshot_hash"] == "winner"
    assert verify_full(layout)["orphans"] == []
    assert [row["generation_id"] for row in list_generations(layout)] == [published, base.generation_id]


def test_waiting_builder_publishes_after_the_holder(layout: IndexLayout) -> None:
    publish_db(layout, "a")
    holder = start_builder(layout, "b", "first", wait=0.0, hold=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        waiter = start_builder(layout, "c", "second", wait=60.0, hold=False)
        out_holder, _ = holder.communicate("go\n", timeout=60)
        out_waiter, err = waiter.communicate(timeout=60)
    finally:
        holder.kill()
    assert holder.returncode == 0 and waiter.returncode == 0, err
    first_id, second_id = out_holder.split()[-1], out_waiter.split()[-1]
    gen.clear_verify_cache()
    assert resolve(layout).generation_id == second_id
    rows = list_generations(layout)
    assert [row["generation_id"] for row in rows][:2] == [second_id, first_id]
    assert verify_full(layout)["generation_id"] == second_id


def test_compare_and_swap_refuses_a_stale_base(layout: IndexLayout) -> None:
    first = publish_db(layout, "a")
    stale = first.generation_id
    current = publish_db(layout, "b")
    with build_lock(layout):
        staged = make_db(new_staging_path(layout), "c")
        with pytest.raises(BuildLockedError) as info:
            publish(layout, staged, record(), expected_base=stale)
    assert info.value.reason == "build_locked"
    assert (info.value.evidence["expected"], info.value.evidence["actual"]) == (stale, current.generation_id)
    assert not staged.exists()
    assert {p.name for p in layout.manifests_dir.iterdir()} == {current.path.name, first.path.name}
    assert {p.name for p in layout.segments_dir.iterdir()} == {p.parts[0].path.name for p in (first, current)}
    assert list(layout.staging_dir.iterdir()) == []  # the refused publish removed its part and manifest
    assert resolve(layout).generation_id == current.generation_id
    assert len(list_generations(layout)) == 2


@pytest.mark.parametrize("has_state", [False, True])
def test_compare_and_swap_on_first_publish(layout: IndexLayout, has_state: bool) -> None:
    """Expecting a base when there is none (or none when there is one) is refused too."""
    existing = publish_db(layout, "a").generation_id if has_state else None
    expected = None if has_state else "g20000101T000000-000000000000"
    with build_lock(layout):
        staged = make_db(new_staging_path(layout), "b")
        with pytest.raises(BuildLockedError) as info:
            publish(layout, staged, record(), expected_base=expected)
    assert info.value.evidence["actual"] == existing
    assert layout.state_path.exists() == has_state
    assert list(layout.staging_dir.iterdir()) == []
