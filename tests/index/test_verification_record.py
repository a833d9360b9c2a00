"""The verification record (issues #14, #29): a later process skips hashing a part only while the part's
(dev, inode, size, mtime_ns, ctime_ns) is what the process that hashed it saw; entries are keyed by the
part's SHA-256, so a part's entry stays valid across generations. The manifest is always hashed and
matched with the state row. Each change to a part it must notice makes it rehash.

A "later process" is simulated by ``clear_verify_cache()`` (the in-process cache is gone, the record
on disk stays); the cross-process and concurrent-writer cases run real subprocesses.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from core import generations as gen
from core.errors import IntegrityError
from core.index import parts, verify
from core.index import state as gstate
from core.index.layout import IndexLayout
from tests.index.test_generations import make_db, publish_db

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> IndexLayout:
    (tmp_path / "vault").mkdir()
    gen.clear_verify_cache()
    monkeypatch.setattr(parts, "RACY_WINDOW_NS", 0)
    layout = gen.layout_for(tmp_path / "vault")
    publish_db(layout, "a")
    gstate.record_path(layout).unlink()  # the publisher's own record: these tests start without one
    return layout


def later_process_resolve(layout: IndexLayout) -> gen.ResolvedIndex:
    """resolve() as a new process would: no in-process cache, only what is on disk."""
    gen.clear_verify_cache()
    return gen.resolve(layout)


def recorded(layout: IndexLayout) -> gen.ResolvedIndex:
    """Verify once (writes the record), then prove a later process reuses it without hashing."""
    first = later_process_resolve(layout)
    assert gen.VERIFY_STATS["full_hashes"] == 1 and gen.VERIFY_STATS["record_writes"] == 1
    again = later_process_resolve(layout)
    assert again == first
    assert gen.VERIFY_STATS["full_hashes"] == 0 and gen.VERIFY_STATS["record_hits"] == 1
    return first


def writable(path: Path) -> None:
    os.chmod(path, 0o644)


def part_path(resolved: gen.ResolvedIndex) -> Path:
    [part] = resolved.parts
    return part.path


# --- each change the record must notice ----------------------------------------------------------------


def test_record_is_reused_while_nothing_changed(layout: IndexLayout) -> None:
    resolved = recorded(layout)
    body, status = gstate.read_verification(layout)
    assert status == "ok" and body["index_dir"] == str(layout.index_dir)
    assert body["parts"] == {resolved.parts[0].sha256: list(verify._stat_sig(part_path(resolved)))}


def test_bytes_appended_and_mtime_restored(layout: IndexLayout) -> None:
    resolved = recorded(layout)
    path = part_path(resolved)
    before = path.stat()
    writable(path)
    with open(path, "ab") as handle:
        handle.write(b"\0" * 4096)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(IntegrityError) as info:
        later_process_resolve(layout)
    assert info.value.reason == "size_mismatch"
    assert gen.VERIFY_STATS["full_hashes"] == 1 and gen.VERIFY_STATS["record_hits"] == 0


def test_bytes_flipped_in_place_keeping_size_and_mtime(layout: IndexLayout) -> None:
    resolved = recorded(layout)
    path = part_path(resolved)
    before = path.stat()
    writable(path)
    with open(path, "r+b") as handle:
        handle.seek(before.st_size - 100)
        handle.write(b"X")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(IntegrityError) as info:
        later_process_resolve(layout)
    assert info.value.reason == "sha256_mismatch" and gen.VERIFY_STATS["full_hashes"] == 1


def test_file_replaced_by_a_doctored_copy_of_equal_size_and_mtime(layout: IndexLayout) -> None:
    resolved = recorded(layout)
    path = part_path(resolved)
    before = path.stat()
    fake = make_db(layout.index_dir / "fake.db", "b")
    os.replace(fake, path)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    with pytest.raises(IntegrityError) as info:
        later_process_resolve(layout)
    assert info.value.reason == "sha256_mismatch" and gen.VERIFY_STATS["full_hashes"] == 1


def test_inode_change_with_identical_bytes_is_rehashed(layout: IndexLayout) -> None:
    resolved = recorded(layout)
    path = part_path(resolved)
    copy = path.with_name("copy.db")
    shutil.copy2(path, copy)
    os.replace(copy, path)
    assert path.stat().st_ino != resolved.pinned.inode[1]
    assert later_process_resolve(layout) == resolved  # the same bytes: served, after a full hash
    assert gen.VERIFY_STATS["full_hashes"] == 1 and gen.VERIFY_STATS["record_hits"] == 0


def test_state_db_edit_is_read_again_and_the_unchanged_part_stays_vouched(layout: IndexLayout) -> None:
    recorded(layout)
    conn = sqlite3.connect(layout.state_path)
    conn.execute("UPDATE generations SET timings = '{\"total\": 9}'")
    conn.commit()
    conn.close()
    assert later_process_resolve(layout).record["timings"] == {"total": 9}
    assert gen.VERIFY_STATS["full_hashes"] == 0 and gen.VERIFY_STATS["record_hits"] == 1


def test_a_state_row_naming_another_manifest_is_refused_before_any_part_is_trusted(layout: IndexLayout) -> None:
    recorded(layout)
    conn = sqlite3.connect(layout.state_path)
    conn.execute("UPDATE generations SET sha256 = ?, file_name = ?", ("0" * 64, f"{'0' * 64}.json"))
    conn.commit()
    conn.close()
    with pytest.raises(IntegrityError) as info:
        later_process_resolve(layout)
    assert info.value.reason == "missing" and info.value.evidence["expected"] == "0" * 64


def test_a_parts_record_stays_valid_across_generations(layout: IndexLayout) -> None:
    """Parts never change: the entry of the first generation's part still vouches for it after another
    generation was published and the pointer is moved back to the first."""
    first = recorded(layout)
    publish_db(layout, "b")
    conn = sqlite3.connect(layout.state_path)
    conn.execute("UPDATE active SET generation_id = ?", (first.generation_id,))
    conn.commit()
    conn.close()
    assert later_process_resolve(layout).generation_id == first.generation_id
    assert gen.VERIFY_STATS["full_hashes"] == 0 and gen.VERIFY_STATS["record_hits"] == 1


def _edit_field(doc: dict) -> None:
    for sig in doc["body"]["parts"].values():
        sig[2] += 1  # claims another size, digest left as it was


def _edit_field_and_digest(doc: dict) -> None:
    [sig] = doc["body"]["parts"].values()
    doc["body"]["parts"] = {"0" * 64: sig}  # vouches for another part
    doc["digest"] = gstate._record_digest(doc["body"])


def _other_format(doc: dict) -> None:
    doc["format"] = 999


RECORD_EDITS = {"field": _edit_field, "field_and_digest": _edit_field_and_digest, "format": _other_format}


@pytest.mark.parametrize("name", sorted(RECORD_EDITS))
def test_edited_record_is_ignored(layout: IndexLayout, name: str) -> None:
    recorded(layout)
    path = gstate.record_path(layout)
    doc = json.loads(path.read_text())
    RECORD_EDITS[name](doc)
    path.write_text(json.dumps(doc))
    later_process_resolve(layout)
    assert gen.VERIFY_STATS["full_hashes"] == 1 and gen.VERIFY_STATS["record_hits"] == 0
    assert gstate.read_verification(layout)[1] == "ok"  # rewritten by the process that rehashed


@pytest.mark.parametrize("keep", [0, 1, 40])
def test_truncated_record_is_ignored(layout: IndexLayout, keep: int) -> None:
    recorded(layout)
    path = gstate.record_path(layout)
    path.write_bytes(path.read_bytes()[:keep])
    assert gstate.read_verification(layout)[1] == "invalid"
    later_process_resolve(layout)
    assert gen.VERIFY_STATS["full_hashes"] == 1


def test_record_that_is_a_fifo_is_ignored_without_hanging(layout: IndexLayout) -> None:
    os.mkfifo(gstate.record_path(layout))
    assert gstate.read_verification(layout) == (None, "not_a_file")
    later_process_resolve(layout)
    assert gen.VERIFY_STATS["full_hashes"] == 1


def test_new_generation_is_not_vouched_for_by_the_old_record(layout: IndexLayout) -> None:
    recorded(layout)
    old_record = gstate.record_path(layout).read_bytes()
    newer = publish_db(layout, "b")
    gstate.record_path(layout).write_bytes(old_record)  # the publisher's entry for the new part undone
    assert later_process_resolve(layout).generation_id == newer.generation_id
    assert gen.VERIFY_STATS["full_hashes"] == 1 and gen.VERIFY_STATS["record_hits"] == 0


def test_the_publisher_records_the_part_it_hashed(layout: IndexLayout) -> None:
    newer = publish_db(layout, "b")
    assert later_process_resolve(layout).generation_id == newer.generation_id
    assert gen.VERIFY_STATS["full_hashes"] == 0 and gen.VERIFY_STATS["record_hits"] == 1


def test_racy_file_is_neither_trusted_nor_recorded(layout: IndexLayout, monkeypatch: pytest.MonkeyPatch) -> None:
    recorded(layout)
    monkeypatch.setattr(parts, "RACY_WINDOW_NS", 3600 * 10**9)  # everything counts as just written
    later_process_resolve(layout)
    assert gen.VERIFY_STATS["full_hashes"] == 1 and gen.VERIFY_STATS["record_writes"] == 0


def test_verify_always_hashes(layout: IndexLayout) -> None:
    recorded(layout)
    gen.clear_verify_cache()
    gen.verify_full(layout)
    assert gen.VERIFY_STATS["full_hashes"] == 1 and gen.VERIFY_STATS["record_hits"] == 0


# --- across processes ------------------------------------------------------------------------------------

PROBE = """
import json, sys
from pathlib import Path
from core import generations as gen
from core.index import parts, verify
parts.RACY_WINDOW_NS = 0
layout = gen.layout_for(Path(sys.argv[1]))
resolved = gen.resolve(layout)
conn = gen.connect_readonly(resolved)
rows = conn.execute("SELECT count(*) FROM t").fetchone()[0]
print(json.dumps({"gid": resolved.generation_id, "rows": rows, **gen.VERIFY_STATS}))
"""


def run_probes(layout: IndexLayout, n: int) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", PROBE, str(layout.vault)], stdout=subprocess.PIPE, env=env)
        for _ in range(n)
    ]
    outs = [proc.communicate(timeout=120)[0] for proc in procs]
    assert all(proc.returncode == 0 for proc in procs)
    return [json.loads(out) for out in outs]


def test_concurrent_processes_writing_the_record_at_once(layout: IndexLayout) -> None:
    gstate.record_path(layout).unlink(missing_ok=True)
    active = gen.active_record(layout)["generation_id"]
    first = run_probes(layout, 6)
    assert {(p["gid"], p["rows"]) for p in first} == {(active, 20)}
    assert sum(p["full_hashes"] for p in first) >= 1  # whoever found no record hashed
    assert gstate.read_verification(layout)[1] == "ok"  # the last rename left one whole record
    assert list(layout.index_dir.glob(".verified-*.tmp")) == []
    later = run_probes(layout, 2)
    assert all(p["full_hashes"] == 0 and p["record_hits"] == 1 for p in later)


def test_a_record_temp_renamed_while_the_reaper_lists_it_is_skipped(
    layout: IndexLayout, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader renames its ``.verified-*.tmp`` at any moment; one listed and then gone before ``stat`` is
    not debris (CI once failed a publish with FileNotFoundError there). An old one is still reaped."""
    old = layout.index_dir / f".verified-1-{'a' * 32}.tmp"
    old.write_text("{")
    os.utime(old, (1_000_000, 1_000_000))
    vanished = layout.index_dir / f".verified-2-{'b' * 32}.tmp"
    listed = Path.glob
    monkeypatch.setattr(Path, "glob", lambda self, pattern: [*listed(self, pattern), vanished])
    assert gstate.stale_record_temps(layout, older_than=2_000_000) == [old]
