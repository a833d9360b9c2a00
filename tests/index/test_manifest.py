"""A generation is a hashed manifest of content-addressed parts (issue #29, storage step 1).

Real publishes into tmp_path, then one thing at a time is doctored, removed, added or raced: a part,
the manifest, the state row. Every refusal is typed and names the file with the expected and the
actual digest; nothing older, mixed or never published is ever served.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from core import cli
from core import generations as gen
from core.build.builder import build_index
from core.errors import GenerationMissingError, IntegrityError, UnsupportedIndexFormatError
from core.generations import (
    IndexLayout,
    build_lock,
    layout_for,
    list_generations,
    new_staging_path,
    publish,
    resolve,
    verify_full,
)
from core.index import debris as debris_rules
from core.index import parts, verify
from core.index.manifest import MANIFEST_FORMAT, MANIFEST_VERSION
from core.searcher import search_vault
from tests.conftest import note
from tests.index.test_generations import make_db, make_record, publish_db, sha_of


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> IndexLayout:
    (tmp_path / "vault").mkdir()
    gen.clear_verify_cache()
    monkeypatch.setattr(parts, "RACY_WINDOW_NS", 0)
    return layout_for(tmp_path / "vault")


def forge(layout: IndexLayout, edit: Callable[[dict[str, Any]], None]) -> Path:
    """Rewrite the active generation's manifest through ``edit`` and make the state row name the result
    (a consistent forgery of manifest and row: only what the manifest says can refuse it). ``edit`` finds
    the segment entry of the other ready generation under ``_other``."""
    rows = [row for row in list_generations(layout) if row["status"] == "ready"]
    active = next(row for row in rows if row["active"])
    doc = json.loads((layout.manifests_dir / active["file_name"]).read_bytes())
    other = [row for row in rows if not row["active"]][0]
    doc["_other"] = json.loads((layout.manifests_dir / other["file_name"]).read_bytes())["segments"][0]
    edit(doc)
    doc.pop("_other", None)
    raw = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    sha = hashlib.sha256(raw).hexdigest()
    path = layout.manifests_dir / f"{sha}.json"
    path.write_bytes(raw)
    conn = sqlite3.connect(layout.state_path)
    conn.execute(
        "UPDATE generations SET sha256 = ?, file_name = ?, size = ? WHERE generation_id = ?",
        (sha, path.name, len(raw), active["generation_id"]),
    )
    conn.commit()
    conn.close()
    gen.clear_verify_cache()
    return path


# --- the format ---------------------------------------------------------------------------------------------


def test_the_manifest_is_canonical_json_and_its_hash_is_the_generation_identity(layout: IndexLayout) -> None:
    published = publish_db(layout, "a")
    raw = published.path.read_bytes()
    doc = json.loads(raw)
    assert raw == json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    assert published.sha256 == hashlib.sha256(raw).hexdigest() == published.path.stem
    assert published.generation_id.endswith(published.sha256[:12]) and published.size == len(raw)
    row = gen.active_record(layout)
    assert (row["sha256"], row["size"], row["file_name"]) == (published.sha256, len(raw), published.path.name)
    [part] = published.parts
    assert (doc["format"], doc["version"], doc["tombstones"], doc["dense"]) == (
        MANIFEST_FORMAT,
        MANIFEST_VERSION,
        [],
        [],
    )
    assert doc["segments"] == [{"sha256": part.sha256, "size": part.size, "notes": 3, "chunks": 6, "dense_chunks": 0}]
    assert doc["source"] == {"snapshot_hash": "snap-" + "0" * 10}
    assert part.sha256 == sha_of(part.path) and part.path.name == f"{part.sha256}.seg"


def test_a_build_records_schema_and_analysis_identity_in_the_manifest(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "a.md").write_text(note("Alpha", "alpha words"), encoding="utf-8")
    report = build_index(vault)
    resolved = resolve(layout_for(vault))
    doc = json.loads(resolved.path.read_bytes())
    assert resolved.generation_id == report.generation_id
    assert doc["schema"] == doc["analysis"]["schema_version"] and doc["analysis"]["tokenizer"]
    assert doc["segments"][0]["notes"] == 1


def test_identical_bytes_share_one_part(layout: IndexLayout) -> None:
    first = publish_db(layout, "a")
    second = publish_db(layout, "a")
    assert first.generation_id != second.generation_id
    assert first.parts[0].path == second.parts[0].path
    assert [p.name for p in layout.segments_dir.iterdir()] == [first.parts[0].path.name]
    assert verify_full(layout)["orphans"] == []


# --- refusals, with evidence ----------------------------------------------------------------------------------


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-512])


PART_DAMAGE = {"doctored": (_flip, "sha256_mismatch"), "truncated": (_truncate, "size_mismatch")}


@pytest.mark.parametrize("cache", ["cold", "warm"])
@pytest.mark.parametrize("damage", sorted(PART_DAMAGE))
def test_a_damaged_part_fails_closed_naming_it(layout: IndexLayout, damage: str, cache: str) -> None:
    old = publish_db(layout, "a")
    new = publish_db(layout, "b")
    if cache == "warm":
        resolve(layout)
    else:
        gen.clear_verify_cache()
    hurt, reason = PART_DAMAGE[damage]
    [part] = new.parts
    hurt(part.path)
    for check in (resolve, verify_full):
        with pytest.raises(IntegrityError) as info:
            check(layout)
        assert info.value.reason == reason
        assert info.value.evidence["path"] == str(part.path)
        expected = part.sha256 if reason == "sha256_mismatch" else part.size
        assert info.value.evidence["expected"] == expected and info.value.evidence["actual"] != expected
    assert sha_of(old.parts[0].path) == old.parts[0].sha256  # the older generation was there, and not served


def test_a_missing_part_fails_closed_naming_it(layout: IndexLayout) -> None:
    publish_db(layout, "a")
    new = publish_db(layout, "b")
    gen.clear_verify_cache()
    new.parts[0].path.unlink()
    with pytest.raises(GenerationMissingError) as info:
        resolve(layout)
    assert info.value.reason == "missing"
    assert (info.value.evidence["path"], info.value.evidence["expected"]) == (
        str(new.parts[0].path),
        new.parts[0].sha256,
    )


def test_a_doctored_manifest_fails_closed_naming_it(layout: IndexLayout) -> None:
    published = publish_db(layout, "a")
    gen.clear_verify_cache()
    raw = published.path.read_bytes()
    published.path.write_bytes(raw.replace(b'"notes":3', b'"notes":4'))  # same size, other bytes
    with pytest.raises(IntegrityError) as info:
        resolve(layout)
    assert info.value.reason == "sha256_mismatch" and info.value.evidence["path"] == str(published.path)
    assert info.value.evidence["expected"] == published.sha256
    assert info.value.evidence["actual"] == hashlib.sha256(published.path.read_bytes()).hexdigest()


def _two_segments(doc: dict[str, Any]) -> None:
    """List the other generation's (genuine) segment too: a generation of two segments."""
    doc["segments"].append(doc.pop("_other"))


def _a_tombstone(doc: dict[str, Any]) -> None:
    doc["tombstones"] = [{"segment": doc["segments"][0]["sha256"], "sha256": "c" * 64, "rows": 1}]


def _unknown_part_kind(doc: dict[str, Any]) -> None:
    doc["vectors"] = []


def _another_version(doc: dict[str, Any]) -> None:
    doc["version"] = MANIFEST_VERSION + 1


UNSUPPORTED = {
    "two_segments": _two_segments,
    "a_tombstone": _a_tombstone,
    "unknown_part_kind": _unknown_part_kind,
    "another_version": _another_version,
}


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_a_manifest_this_version_cannot_serve_is_refused_whole(layout: IndexLayout, name: str) -> None:
    publish_db(layout, "a")
    publish_db(layout, "b")
    path = forge(layout, UNSUPPORTED[name])
    for check in (resolve, verify_full):
        with pytest.raises(UnsupportedIndexFormatError) as info:
            check(layout)
        assert info.value.reason == "unsupported_index_format" and "vaultsearch index" in (info.value.hint or "")
        assert info.value.evidence["path"] == str(path)


def test_a_two_segment_generation_is_a_typed_error_for_search_and_the_cli(tmp_path: Path, capsys) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "a.md").write_text(note("Alpha", "alpha words"), encoding="utf-8")
    build_index(vault)
    (vault / "b.md").write_text(note("Beta", "beta words"), encoding="utf-8")
    build_index(vault)
    layout = layout_for(vault)
    forge(layout, _two_segments)
    with pytest.raises(UnsupportedIndexFormatError):
        search_vault(vault, "alpha")
    code = cli.main(["search", str(vault), "alpha", "--json"])
    _, err = capsys.readouterr()
    assert code == 4 and json.loads(err)["reason"] == "unsupported_index_format"  # no traceback, no results


def test_an_unknown_file_in_segments_is_an_orphan_not_a_part(layout: IndexLayout) -> None:
    publish_db(layout, "a")
    stray = layout.segments_dir / f"{'d' * 64}.seg"
    stray.write_bytes(b"not listed by any manifest")
    report = verify_full(layout)
    assert report["orphans"] == [str(stray)] and len(report["parts"]) == 1
    publish_db(layout, "b")
    assert not stray.exists()


# --- a part gone between reading the manifest and opening it ------------------------------------------------------


def test_a_reader_overtaken_by_publishes_resolves_the_active_generation_again(
    layout: IndexLayout, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader read the manifest of A; before it opens A's part, two publishes (keep 1, no grace) remove
    A whole. It resolves again and serves the newest generation: never A half-opened, never an error."""
    publish_db(layout, "a")
    gen.clear_verify_cache()
    seen: list[str] = []

    def overtake(layout_: IndexLayout, record: dict[str, Any]) -> None:
        seen.append(record["generation_id"])
        if len(seen) == 1:
            publish_db(layout_, "b", keep=1)
            seen.append(publish_db(layout_, "c", keep=1).generation_id)

    monkeypatch.setattr(verify, "AFTER_MANIFEST_HOOK", overtake)
    resolved = resolve(layout)
    assert resolved.generation_id == seen[1] == gen.active_record(layout)["generation_id"]
    assert seen[2] == seen[1]  # the second pass read the active generation's manifest


def test_a_part_gone_while_its_generation_stays_active_is_the_error(
    layout: IndexLayout, monkeypatch: pytest.MonkeyPatch
) -> None:
    published = publish_db(layout, "a")
    gen.clear_verify_cache()

    def remove_part(layout_: IndexLayout, record: dict[str, Any]) -> None:
        published.parts[0].path.unlink(missing_ok=True)

    monkeypatch.setattr(verify, "AFTER_MANIFEST_HOOK", remove_part)
    with pytest.raises(GenerationMissingError) as info:
        resolve(layout)
    assert info.value.evidence["path"] == str(published.parts[0].path)


# --- removal of unreferenced parts after a grace period ------------------------------------------------------------


def test_a_removed_generation_outlives_retention_by_the_grace_period(layout: IndexLayout) -> None:
    first = publish_db(layout, "a", grace_s=3600.0)
    publish_db(layout, "b", grace_s=3600.0)
    publish_db(layout, "c", grace_s=3600.0)  # retention removes `first`: its files stay within the grace
    rows = {row["generation_id"]: row for row in list_generations(layout)}
    assert rows[first.generation_id]["status"] == "removed" and rows[first.generation_id]["removed_at"] > 0
    assert first.path.exists() and first.parts[0].path.exists()
    assert verify_full(layout)["orphans"] == []  # still needed by a reader that read the state before
    publish_db(layout, "d", grace_s=0.0)  # the grace is over: what only removed generations listed goes
    assert not first.path.exists() and not first.parts[0].path.exists()
    ready = [row for row in list_generations(layout) if row["status"] == "ready"]
    assert sorted(p.name for p in layout.manifests_dir.iterdir()) == sorted(row["file_name"] for row in ready)


def test_a_part_a_kept_manifest_lists_is_never_removed(layout: IndexLayout) -> None:
    """Two generations share a part under different manifests: removing the older keeps the part."""
    first = publish_db(layout, "a")
    with build_lock(layout):
        staged = make_db(new_staging_path(layout), "a")  # the same bytes: the same part
        record = dataclasses.replace(make_record(), notes=4)  # another manifest
        second = publish(layout, staged, record, expected_base=first.generation_id, grace_s=0.0)
    assert second.parts[0].path == first.parts[0].path and second.path != first.path
    publish_db(layout, "b")  # retention removes `first`; its manifest goes, the shared part stays
    assert not first.path.exists() and second.path.exists() and first.parts[0].path.exists()
    assert resolve(layout).generation_id != first.generation_id and verify_full(layout)["orphans"] == []


def test_a_build_that_publishes_nothing_still_removes_what_the_grace_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files kept for the grace period do not wait for the next publish: every build collects them first."""
    vault = tmp_path / "vault"
    vault.mkdir()
    monkeypatch.setattr(debris_rules, "GC_GRACE_S", 3600.0)
    for i in range(3):
        (vault / "a.md").write_text(note("Alpha", f"alpha words, version {i}"), encoding="utf-8")
        build_index(vault)
    layout = layout_for(vault)
    assert len(list(layout.manifests_dir.iterdir())) == 3  # the removed generation's manifest, kept by the grace
    monkeypatch.setattr(debris_rules, "GC_GRACE_S", 0.0)
    assert build_index(vault).up_to_date
    ready = [row for row in list_generations(layout) if row["status"] == "ready"]
    assert sorted(p.name for p in layout.manifests_dir.iterdir()) == sorted(row["file_name"] for row in ready)
    # every part left is one a kept generation lists (an incremental build shares the unchanged ones)
    kept = debris_rules.referenced_parts(layout, {row["file_name"] for row in ready})
    assert kept is not None and {p.name for p in layout.segments_dir.iterdir()} == kept


def test_the_grace_counts_from_when_a_generation_was_superseded_not_from_its_removal() -> None:
    """With two generations retained a generation is removed one whole publish after it stopped being
    active: only a reader of that older state row can need it, so its grace started back then."""
    now = 1_000.0
    rows = [  # newest first, as list_generations gives them
        {"file_name": "c.json", "status": "ready", "created_at": now - 1, "removed_at": None},
        {"file_name": "b.json", "status": "ready", "created_at": now - 5, "removed_at": None},
        {"file_name": "a.json", "status": "removed", "created_at": now - 10, "removed_at": now},
    ]
    assert debris_rules.kept_manifests(rows, now, grace_s=2.0) == {"c.json", "b.json"}  # `a` superseded 5 s ago
    assert debris_rules.kept_manifests(rows, now, grace_s=6.0) == {"c.json", "b.json", "a.json"}


def test_a_doctored_file_under_a_shared_part_name_is_never_vouched_for(layout: IndexLayout) -> None:
    """A publish whose part's name exists already shares that file after a size check only; it must not
    record it as verified: the next reader hashes it and refuses the doctored bytes, naming the part."""
    first = publish_db(layout, "a")
    part = first.parts[0].path
    part.chmod(0o644)
    _flip(part)  # same size, other bytes, under the content-addressed name
    with build_lock(layout):
        staged = make_db(new_staging_path(layout), "a")  # the bytes that name stands for
        record = dataclasses.replace(make_record(), notes=4)
        shared = publish(layout, staged, record, expected_base=first.generation_id, grace_s=0.0)
    assert shared.parts[0].path == part
    gen.clear_verify_cache()
    with pytest.raises(IntegrityError) as info:
        resolve(layout)
    assert info.value.reason == "sha256_mismatch" and info.value.evidence["path"] == str(part)
