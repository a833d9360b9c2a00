"""Publish/resolve/verify of immutable generations, proved by corrupting one thing at a time.

The unit under test (publish, resolve, verify_full) is never mocked: each test builds small real
SQLite files in tmp_path, publishes them and then tampers with the files on disk.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from core import generations as gen
from core.errors import (
    BuildError,
    IndexMissingError,
    IntegrityError,
    SchemaMismatchError,
    Sha256MismatchError,
    SizeMismatchError,
    SqliteIntegrityError,
    StateCorruptError,
    ValidationError,
)
from core.generations import (
    GenerationRecord,
    IndexLayout,
    active_record,
    atomic,
    build_lock,
    connect_readonly,
    ensure_layout,
    layout_for,
    list_generations,
    new_staging_path,
    publish,
    resolve,
    verify_full,
)
from core.index import parts, verify
from core.index import state as gstate

GEN_ID = re.compile(r"^g\d{8}T\d{6}-[0-9a-f]{12}$")


# --- helpers (kept local: this project has no shared conftest for them) ----------------------------------


def make_db(path: Path, letter: str = "a", rows: int = 20) -> Path:
    """A small valid SQLite file; the same ``rows`` with another ``letter`` gives the same size."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
    conn.executemany("INSERT INTO t (body) VALUES (?)", [(letter * 200,) for _ in range(rows)])
    conn.commit()
    conn.close()
    return path


def make_record(notes: int = 3) -> GenerationRecord:
    return GenerationRecord(
        source_snapshot_hash="snap-" + "0" * 10,
        notes=notes,
        chunks=notes * 2,
        dense_chunks=0,
        chunker="heading-v1:600:60",
        tokenizer="unicode61",
        timings={"total": 0.5},
        problems=[{"path": "bad.md", "reason": "yaml"}],
    )


def publish_db(layout: IndexLayout, letter: str = "a", *, keep: int = 2, grace_s: float = 0.0) -> gen.ResolvedIndex:
    """Publish a small database; ``grace_s`` 0 removes what a removed generation alone needs at once."""
    with build_lock(layout):
        base = active_record(layout)
        staged = make_db(new_staging_path(layout), letter)
        expected = base["generation_id"] if base else None
        return publish(layout, staged, make_record(), expected_base=expected, keep=keep, grace_s=grace_s)


def sha_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def set_active(layout: IndexLayout, generation_id: str) -> None:
    """Edit the active pointer from outside, as a user with the sqlite3 shell would."""
    conn = sqlite3.connect(layout.state_path)
    conn.execute("UPDATE active SET generation_id = ? WHERE id = 1", (generation_id,))
    conn.commit()
    conn.close()


def warm(layout: IndexLayout) -> gen.ResolvedIndex:
    """Resolve, then prove the next resolve is served from the verified-identity cache."""
    first = resolve(layout)
    hits = gen.VERIFY_STATS["cache_hits"]
    assert resolve(layout) == first
    assert gen.VERIFY_STATS["cache_hits"] == hits + 1
    return first


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> IndexLayout:
    vault = tmp_path / "vault"
    vault.mkdir()
    gen.clear_verify_cache()
    # Files published a moment ago are "racy" and never cached; tests that need a warm cache right
    # after publishing switch that guard off (it has its own test below).
    monkeypatch.setattr(parts, "RACY_WINDOW_NS", 0)
    return layout_for(vault)


@pytest.fixture
def two(layout: IndexLayout) -> tuple[IndexLayout, gen.ResolvedIndex, gen.ResolvedIndex]:
    """Two published generations of equal size; the second is active."""
    old = publish_db(layout, "a")
    new = publish_db(layout, "b")
    assert old.size == new.size and old.sha256 != new.sha256
    gen.clear_verify_cache()
    return layout, old, new


# --- layout ------------------------------------------------------------------------------------------------


def test_layout_defaults_and_override(tmp_path: Path) -> None:
    default = layout_for(tmp_path)
    assert default.index_dir == tmp_path.resolve() / ".vaultsearch"
    assert default.state_path.parent == default.segments_dir.parent == default.manifests_dir.parent == default.index_dir
    other = layout_for(tmp_path, tmp_path / "elsewhere")
    assert other.index_dir == (tmp_path / "elsewhere").resolve()
    ensure_layout(other)
    assert (other.index_dir / ".gitignore").read_text() == "*\n"
    assert other.segments_dir.is_dir() and other.manifests_dir.is_dir() and other.staging_dir.is_dir()
    assert not other.generations_dir.exists()  # the one-file format's folder is no longer made


# --- publish and resolve -----------------------------------------------------------------------------------


def test_publish_then_resolve_serves_verified_generation(layout: IndexLayout) -> None:
    published = publish_db(layout, "a")
    resolved = resolve(layout)
    assert resolved == published
    assert resolved.kind == "immutable_generation"
    assert GEN_ID.match(resolved.generation_id)
    assert resolved.path == layout.manifests_dir / f"{resolved.sha256}.json"
    assert resolved.sha256 == sha_of(resolved.path) and resolved.size == resolved.path.stat().st_size
    assert resolved.generation_id.endswith(resolved.sha256[:12])
    [part] = resolved.parts
    assert part.path == layout.segments_dir / f"{part.sha256}.seg" and part.sha256 == sha_of(part.path)
    assert (part.kind, part.size) == ("segment", part.path.stat().st_size)
    assert resolved.record["timings"] == {"total": 0.5} and resolved.record["notes"] == 3
    assert resolved.record["problems"] == [{"path": "bad.md", "reason": "yaml"}]
    assert resolved.source_snapshot_hash == "snap-" + "0" * 10
    assert list(layout.staging_dir.iterdir()) == []
    conn = connect_readonly(resolved)
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 20
    with pytest.raises(sqlite3.OperationalError):
        conn.execute("INSERT INTO t (body) VALUES ('x')")
    conn.close()


def test_staging_and_publish_require_the_build_lock(layout: IndexLayout) -> None:
    with pytest.raises(BuildError) as info:
        new_staging_path(layout)
    assert info.value.reason == "build_failed"
    with build_lock(layout):
        staged = make_db(new_staging_path(layout))
    with pytest.raises(BuildError) as info:
        publish(layout, staged, make_record(), expected_base=None)
    assert info.value.reason == "build_failed"
    assert not layout.state_path.exists() and staged.exists()


def test_state_db_uses_rollback_journal_not_wal(layout: IndexLayout) -> None:
    publish_db(layout)
    conn = sqlite3.connect(layout.state_path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()


def test_identical_content_published_twice_gets_distinct_ids(layout: IndexLayout) -> None:
    first = publish_db(layout, "a")
    second = publish_db(layout, "a")
    assert first.sha256 == second.sha256 and first.generation_id != second.generation_id
    assert resolve(layout).generation_id == second.generation_id


def test_publish_invalidates_the_cache(layout: IndexLayout) -> None:
    publish_db(layout, "a")
    warm(layout)
    newer = publish_db(layout, "b")
    hits, recorded = gen.VERIFY_STATS["cache_hits"], gen.VERIFY_STATS["record_hits"]
    assert resolve(layout).generation_id == newer.generation_id
    # verified again, not served from the cache: the new part vouched for by the publisher's own record
    assert gen.VERIFY_STATS["cache_hits"] == hits and gen.VERIFY_STATS["record_hits"] == recorded + 1


@pytest.mark.parametrize("kind", ["garbage", "corrupt_page"])
def test_staged_file_failing_integrity_check_is_refused(layout: IndexLayout, kind: str) -> None:
    active = publish_db(layout, "a")
    with build_lock(layout):
        staged = new_staging_path(layout)
    if kind == "garbage":
        staged.write_bytes(b"not sqlite at all" * 100)
    else:
        make_db(staged, "z", rows=200)
        data = bytearray(staged.read_bytes())
        data[4096 + 8 : 4096 + 400] = b"\xff" * 392  # smash the b-tree page after the header page
        staged.write_bytes(bytes(data))
    with build_lock(layout), pytest.raises(SqliteIntegrityError) as info:
        publish(layout, staged, make_record(), expected_base=active.generation_id)
    assert info.value.reason == "integrity_check_failed"
    assert not staged.exists()
    assert resolve(layout).generation_id == active.generation_id
    assert [p.name for p in layout.manifests_dir.iterdir()] == [active.path.name]
    assert [p.name for p in layout.segments_dir.iterdir()] == [active.parts[0].path.name]


def test_staged_file_with_pending_wal_is_refused(layout: IndexLayout) -> None:
    with build_lock(layout):
        staged = make_db(new_staging_path(layout))
    Path(f"{staged}-wal").write_bytes(b"pending frames")
    with build_lock(layout), pytest.raises(ValidationError) as info:
        publish(layout, staged, make_record(), expected_base=None)
    assert info.value.reason == "validation_failed"
    assert not layout.state_path.exists()


# --- every refusal, cold and warm ----------------------------------------------------------------------------


def _replace_keeping_mtime(target: Path, source: Path) -> None:
    """Swap in another file's bytes under the same name, size and mtime (only inode/ctime differ)."""
    before = target.stat()
    temp = target.with_suffix(".swap")
    shutil.copyfile(source, temp)
    os.replace(temp, target)
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))


def _tamper_delete(layout, old, new):
    new.path.unlink()


def _tamper_append(layout, old, new):
    with open(new.path, "ab") as handle:
        handle.write(b"\0" * 10)


def _tamper_swap(layout, old, new):
    _replace_keeping_mtime(new.path, old.path)


def _tamper_pointer_missing(layout, old, new):
    set_active(layout, "g20000101T000000-000000000000")


def _tamper_state_garbage(layout, old, new):
    layout.state_path.write_bytes(b"garbage, not a database" * 50)


def _tamper_state_table_dropped(layout, old, new):
    conn = sqlite3.connect(layout.state_path)
    conn.execute("DROP TABLE active")
    conn.commit()
    conn.close()


REFUSALS = {
    "file_deleted": (_tamper_delete, "missing"),
    "bytes_appended": (_tamper_append, "size_mismatch"),
    "replaced_by_other_generation": (_tamper_swap, "sha256_mismatch"),
    "pointer_to_missing_id": (_tamper_pointer_missing, "state_corrupt"),
    "state_garbage": (_tamper_state_garbage, "state_corrupt"),
    "state_table_dropped": (_tamper_state_table_dropped, "state_corrupt"),
}


@pytest.mark.parametrize("cache", ["cold", "warm"])
@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_resolve_refuses_each_corruption(two, name: str, cache: str) -> None:
    layout, old, new = two
    tamper, reason = REFUSALS[name]
    if cache == "warm":
        warm(layout)
    layout.legacy_path.write_bytes(b"")  # a legacy file beside a broken state must not be served either
    tamper(layout, old, new)
    with pytest.raises(IntegrityError) as info:
        resolve(layout)
    assert info.value.reason == reason
    assert old.path.exists() and sha_of(old.path) == old.sha256  # the older generation was not served
    with pytest.raises(IntegrityError) as again:
        verify_full(layout)
    assert again.value.reason == reason


@pytest.mark.parametrize("cache", ["cold", "warm"])
def test_pointer_edited_to_another_existing_generation_is_served_verified(two, cache: str) -> None:
    layout, old, new = two
    if cache == "warm":
        warm(layout)
    gstate.record_path(layout).unlink()  # no record: the old generation's part is hashed
    hashes = gen.VERIFY_STATS["full_hashes"]
    set_active(layout, old.generation_id)
    resolved = resolve(layout)
    assert resolved.generation_id == old.generation_id and resolved.sha256 == sha_of(old.path)
    assert gen.VERIFY_STATS["full_hashes"] == hashes + 1
    assert verify_full(layout)["generation_id"] == old.generation_id


def test_swap_keeping_size_and_mtime_reports_evidence(two) -> None:
    layout, old, new = two
    cached = warm(layout)
    before = new.path.stat()
    _replace_keeping_mtime(new.path, old.path)
    after = new.path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    with pytest.raises(Sha256MismatchError) as info:
        resolve(layout)
    assert info.value.evidence["path"] == str(cached.path)
    assert info.value.evidence["expected"] == new.sha256
    assert info.value.evidence["actual"] == old.sha256


def test_in_place_rewrite_keeping_size_and_mtime_is_caught_by_ctime(two) -> None:
    layout, old, new = two
    warm(layout)
    before = new.path.stat()
    os.chmod(new.path, 0o644)
    for _ in range(200):  # ctime moves on a coarse clock tick; rewrite until it has visibly moved
        with open(new.path, "r+b") as handle:
            handle.seek(before.st_size // 2)
            byte = handle.read(1)
            handle.seek(before.st_size // 2)
            handle.write(bytes([byte[0] ^ 0xFF]))
        os.utime(new.path, ns=(before.st_atime_ns, before.st_mtime_ns))
        now = new.path.stat()
        if now.st_ctime_ns != before.st_ctime_ns and sha_of(new.path) != new.sha256:
            break
        time.sleep(0.005)
    assert (now.st_ino, now.st_size, now.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    assert now.st_ctime_ns != before.st_ctime_ns
    with pytest.raises(Sha256MismatchError) as info:
        resolve(layout)
    assert info.value.reason == "sha256_mismatch"


def test_state_rewrite_keeping_size_and_mtime_is_noticed(two) -> None:
    layout, old, new = two
    warm(layout)
    stat = layout.state_path.stat()
    set_active(layout, old.generation_id)
    os.utime(layout.state_path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert resolve(layout).generation_id == old.generation_id


def test_fingerprint_tracks_inode_and_sqlite_commit_counter(two) -> None:
    """Defence in depth beyond timestamps: a commit to state.db inside one clock tick keeps its size and
    mtime but bumps SQLite's header change counter; a swapped-in file keeps nothing but gets a new inode."""
    layout, old, new = two
    state_before, gen_before = verify._state_fingerprint(layout), verify._stat_sig(new.path)
    set_active(layout, old.generation_id)
    assert verify._state_fingerprint(layout)[-1] != state_before[-1]
    _replace_keeping_mtime(new.path, old.path)
    assert verify._stat_sig(new.path)[1] != gen_before[1]


def test_state_schema_version_mismatch(two) -> None:
    layout, _, _ = two
    conn = sqlite3.connect(layout.state_path)
    conn.execute("UPDATE meta SET value = '999' WHERE key = 'state_schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaMismatchError) as info:
        resolve(layout)
    assert info.value.reason == "schema_mismatch"


def test_recently_changed_generation_is_rehashed_not_cached(two, monkeypatch: pytest.MonkeyPatch) -> None:
    layout, _, new = two
    monkeypatch.setattr(parts, "RACY_WINDOW_NS", 3600 * 10**9)  # everything counts as just written
    hashes = gen.VERIFY_STATS["full_hashes"]
    assert resolve(layout) == resolve(layout) == new
    assert gen.VERIFY_STATS["full_hashes"] == hashes + 2 and gen.VERIFY_STATS["cache_hits"] == 0


def test_racy_timestamps_are_not_cached() -> None:
    now = time.time_ns()
    assert parts.is_racy((0, 0, 0, now, now), now + 1_000)
    assert not parts.is_racy((0, 0, 0, now, now), now + 10 * 60 * 10**9)
    assert parts.is_racy(None, now)


# --- active_record, verify_full ----------------------------------------------------------------------------


def test_active_record_reads_without_hashing(two) -> None:
    layout, old, new = two
    hashes = gen.VERIFY_STATS["full_hashes"]
    record = active_record(layout)
    assert record["generation_id"] == new.generation_id and record["sha256"] == new.sha256
    assert gen.VERIFY_STATS["full_hashes"] == hashes
    set_active(layout, "g20000101T000000-000000000000")
    with pytest.raises(StateCorruptError) as info:
        active_record(layout)
    assert str(layout.index_dir) in info.value.hint  # recovery: delete the derived index and rebuild


def test_active_record_without_state_is_none(layout: IndexLayout) -> None:
    assert active_record(layout) is None and list_generations(layout) == []


def test_verify_full_report_and_collected_problems(two) -> None:
    layout, old, new = two
    report = verify_full(layout)
    assert report["generation_id"] == new.generation_id and report["sha256"] == new.sha256
    assert "integrity_check" in report["checks"] and report["orphans"] == []
    assert report["parts"] == [
        {"kind": "segment", "path": str(new.parts[0].path), "sha256": new.parts[0].sha256, "size": new.parts[0].size}
    ]
    with open(new.parts[0].path, "ab") as handle:
        handle.write(b"\0" * 10)
    with pytest.raises(SizeMismatchError) as info:
        verify_full(layout)
    reasons = [p["reason"] for p in info.value.evidence["problems"]]
    assert reasons == ["size_mismatch", "sha256_mismatch"]
    assert info.value.evidence["path"] == str(new.parts[0].path)


def test_verify_full_runs_integrity_check(two) -> None:
    """A generation whose recorded hashes match corrupt bytes is still refused by integrity_check: a forger
    who rewrites the part, its manifest entry and the state row gets past the hashes, not past verify."""
    layout, old, new = two
    part = new.parts[0].path
    os.chmod(part, 0o644)
    data = bytearray(part.read_bytes())
    data[4096 + 8 : 4096 + 400] = b"\xff" * 392
    part.write_bytes(bytes(data))
    part = part.rename(layout.segments_dir / f"{sha_of(part)}.seg")
    forged = new.path.read_bytes().replace(new.parts[0].sha256.encode(), sha_of(part).encode())
    layout.manifests_dir.joinpath(f"{hashlib.sha256(forged).hexdigest()}.json").write_bytes(forged)
    conn = sqlite3.connect(layout.state_path)
    conn.execute(
        "UPDATE generations SET sha256 = ?, file_name = ? WHERE generation_id = ?",
        (hashlib.sha256(forged).hexdigest(), f"{hashlib.sha256(forged).hexdigest()}.json", new.generation_id),
    )
    conn.commit()
    conn.close()
    assert resolve(layout).generation_id == new.generation_id  # hash and size agree with the state
    with pytest.raises(SqliteIntegrityError) as info:
        verify_full(layout)
    assert info.value.reason == "integrity_check_failed"


# --- retention and reaping ---------------------------------------------------------------------------------


def test_retention_keeps_newest_and_removes_older_files(layout: IndexLayout) -> None:
    published = [publish_db(layout, letter) for letter in "abcd"]
    rows = {row["generation_id"]: row for row in list_generations(layout)}
    assert [rows[p.generation_id]["status"] for p in published] == ["removed", "removed", "ready", "ready"]
    assert [p.path.exists() for p in published] == [False, False, True, True]
    assert [p.parts[0].path.exists() for p in published] == [False, False, True, True]
    assert [row["active"] for row in list_generations(layout)] == [True, False, False, False]
    last = publish_db(layout, "e", keep=1)
    assert sorted(p.name for p in layout.manifests_dir.iterdir()) == [last.path.name]
    assert sorted(p.name for p in layout.segments_dir.iterdir()) == [last.parts[0].path.name]
    assert verify_full(layout)["generation_id"] == last.generation_id


def test_reap_removes_staging_debris_and_orphans(two) -> None:
    layout, old, new = two
    layout.generations_dir.mkdir()  # the one-file format's folder, left by an older vaultsearch
    debris = [
        layout.staging_dir / "dead.db.tmp",
        layout.staging_dir / "state-x.db.tmp",
        layout.staging_dir / "manifest-x.json.tmp",
        layout.generations_dir / "g20000101T000000-aaaaaaaaaaaa.db",
        layout.segments_dir / f"{'a' * 64}.seg",  # a part no manifest lists (a publish killed before its manifest)
        layout.manifests_dir / f"{'b' * 64}.json",  # a manifest no state row names (killed before the commit)
    ]
    foreign = [layout.generations_dir / "junk", layout.staging_dir / "user-file.txt", layout.segments_dir / "x.seg"]
    for path in debris + foreign:
        path.write_bytes(b"x")
    assert sorted(verify_full(layout)["orphans"]) == sorted(str(p) for p in debris)
    newest = publish_db(layout, "c")
    assert not any(p.exists() for p in debris)
    assert all(p.exists() for p in foreign)  # reaping deletes only files we wrote
    assert list(layout.staging_dir.iterdir()) == [layout.staging_dir / "user-file.txt"]
    ready = {row["file_name"] for row in list_generations(layout) if row["status"] == "ready"}
    assert {p.name for p in layout.manifests_dir.iterdir()} == ready == {new.path.name, newest.path.name}
    assert {p.name for p in layout.segments_dir.iterdir()} == {
        new.parts[0].path.name,
        newest.parts[0].path.name,
        "x.seg",
    }
    assert [p.name for p in layout.generations_dir.iterdir()] == ["junk"]


# --- legacy and missing ------------------------------------------------------------------------------------


def test_legacy_index_is_served_only_without_state(layout: IndexLayout) -> None:
    ensure_layout(layout)
    make_db(layout.legacy_path)
    resolved = resolve(layout)
    assert (resolved.kind, resolved.generation_id, resolved.sha256) == ("legacy_db", None, None)
    assert resolved.created_at == layout.legacy_path.stat().st_mtime
    conn = connect_readonly(resolved)
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 20
    conn.close()
    assert verify_full(layout)["kind"] == "legacy_db"
    publish_db(layout, "b")
    assert resolve(layout).kind == "immutable_generation"


def test_no_index_at_all_is_index_missing(layout: IndexLayout) -> None:
    with pytest.raises(IndexMissingError) as info:
        resolve(layout)
    assert info.value.reason == "index_missing" and "vaultsearch index" in info.value.hint


# --- atomic ------------------------------------------------------------------------------------------------


def test_atomic_nests_with_savepoints_and_rolls_back(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "a.db", isolation_level=None)
    conn.execute("CREATE TABLE t (x)")
    with atomic(conn):
        conn.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(KeyError), atomic(conn):
            conn.execute("INSERT INTO t VALUES (2)")
            raise KeyError("inner")
    assert [r[0] for r in conn.execute("SELECT x FROM t")] == [1]
    with pytest.raises(KeyError), atomic(conn):
        conn.execute("INSERT INTO t VALUES (3)")
        raise KeyError("outer")
    assert [r[0] for r in conn.execute("SELECT x FROM t")] == [1]
    assert not conn.in_transaction
