"""Serve the bytes that were hashed (issue #11, "Verified is not what is served").

A doctored copy is swapped in at each point between hashing and opening (injected by wrapping the
step that hashes or copies); the result is either a typed refusal or the verified inode, never the
doctored bytes. The builder and the embedder copy their base hashing while copying.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest

from core import generations as gen
from core.build.builder import build_index
from core.errors import BuildError, GenerationChangedError, IntegrityError
from core.index import parts, pinned, verify
from core.index import state as gstate
from core.index.layout import IndexLayout
from core.searcher import search_vault
from tests.conftest import note
from tests.index.test_generations import make_db, publish_db

GOOD, EVIL = "a" * 200, "b" * 200


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> IndexLayout:
    (tmp_path / "vault").mkdir()
    gen.clear_verify_cache()
    monkeypatch.setattr(parts, "RACY_WINDOW_NS", 0)
    return gen.layout_for(tmp_path / "vault")


def doctored(layout: IndexLayout, path: Path) -> Path:
    """A valid SQLite file with other bytes ('b' rows instead of 'a'), the size of ``path``."""
    fake = make_db(layout.index_dir / "doctored.db", "b")
    assert fake.stat().st_size == path.stat().st_size
    return fake


def served_body(resolved: gen.ResolvedIndex) -> str:
    conn = gen.connect_readonly(resolved)
    try:
        return conn.execute("SELECT body FROM t LIMIT 1").fetchone()[0]
    finally:
        conn.close()


def test_published_generation_files_are_read_only(layout: IndexLayout) -> None:
    published = publish_db(layout, "a")
    assert stat.S_IMODE(published.parts[0].path.stat().st_mode) == 0o444
    assert stat.S_IMODE(published.path.stat().st_mode) == 0o444  # the manifest


def test_swap_during_hashing_is_refused(layout: IndexLayout, monkeypatch: pytest.MonkeyPatch) -> None:
    published = publish_db(layout, "a")
    gen.clear_verify_cache()
    gstate.record_path(layout).unlink()  # the publisher's record of its part: this reader hashes
    fake = doctored(layout, published.parts[0].path)
    real_digest = pinned.PinnedFile.digest

    def digest_then_swap(self: pinned.PinnedFile) -> tuple[str, int]:
        result = real_digest(self)
        os.replace(fake, self.path)  # the doctored copy lands after the hash, before any open
        return result

    monkeypatch.setattr(pinned.PinnedFile, "digest", digest_then_swap)
    with pytest.raises(GenerationChangedError) as info:
        gen.resolve(layout)
    assert info.value.reason == "generation_changed"
    monkeypatch.undo()
    with pytest.raises(IntegrityError) as again:  # the next reader hashes the doctored file and refuses it
        gen.resolve(layout)
    assert again.value.reason == "sha256_mismatch"


def test_append_during_hashing_is_refused_not_returned(layout: IndexLayout, monkeypatch: pytest.MonkeyPatch) -> None:
    published = publish_db(layout, "a")
    gen.clear_verify_cache()
    gstate.record_path(layout).unlink()  # the publisher's record of its part: this reader hashes
    real_digest = pinned.PinnedFile.digest

    def digest_then_append(self: pinned.PinnedFile) -> tuple[str, int]:
        result = real_digest(self)
        os.chmod(self.path, 0o644)
        with open(self.path, "ab") as handle:
            handle.write(b"\0" * 4096)
        return result

    monkeypatch.setattr(pinned.PinnedFile, "digest", digest_then_append)
    with pytest.raises(GenerationChangedError):
        gen.resolve(layout)
    assert published.generation_id  # nothing was returned, nothing cached
    assert not verify._VERIFY_CACHE


def _replace(path: Path, fake: Path) -> None:
    os.replace(fake, path)


def _replace_and_plant_deleted_name(path: Path, fake: Path) -> None:
    """/proc/self/fd/N of an unlinked file reads '<path> (deleted)': plant the doctored bytes there."""
    shutil.copyfile(fake, Path(f"{path} (deleted)"))
    os.replace(fake, path)


def _move_aside_then_replace(path: Path, fake: Path) -> None:
    os.rename(path, path.with_name("moved-aside.db"))
    os.replace(fake, path)


SWAPS = {
    "replace": _replace,
    "plant_deleted_name": _replace_and_plant_deleted_name,
    "move_aside": _move_aside_then_replace,
}


@pytest.mark.parametrize("name", sorted(SWAPS))
def test_swap_between_verify_and_open_never_serves_doctored_bytes(layout: IndexLayout, name: str) -> None:
    publish_db(layout, "a")
    gen.clear_verify_cache()
    gstate.record_path(layout).unlink()
    resolved = gen.resolve(layout)
    SWAPS[name](resolved.parts[0].path, doctored(layout, resolved.parts[0].path))
    try:
        body = served_body(resolved)
    except GenerationChangedError as exc:
        assert exc.reason == "generation_changed"
    else:
        assert body == GOOD  # the verified inode, under whatever name it has now


def test_served_connection_is_the_pinned_inode(layout: IndexLayout) -> None:
    publish_db(layout, "a")
    resolved = gen.resolve(layout)
    conn = gen.connect_readonly(resolved)
    try:
        fds = [int(fd) for fd in os.listdir("/proc/self/fd") if fd != str(resolved.pinned.fd)]
        inodes = set()
        for fd in fds:
            try:
                st = os.fstat(fd)
            except OSError:
                continue
            inodes.add((st.st_dev, st.st_ino))
        assert resolved.pinned.inode in inodes
    finally:
        conn.close()


def test_unpinned_generation_is_not_served(layout: IndexLayout) -> None:
    resolved = publish_db(layout, "a")
    with pytest.raises(BuildError):
        gen.connect_readonly(dataclasses.replace(resolved, pinned=None))


# --- the builder's and the embedder's base ---------------------------------------------------------------


def _doctor_in_place(path: Path) -> None:
    """Flip bytes of the verified inode itself (same inode, same size: only the content hash differs)."""
    os.chmod(path, 0o644)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE notes SET title = upper(title)")
    conn.commit()
    conn.close()


def _vault(tmp_path: Path) -> Path:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "a.md").write_text(note("Alpha", "alpha words here"), encoding="utf-8")
    (vault / "b.md").write_text(note("Beta", "beta words here"), encoding="utf-8")
    return vault


def _before_base_read(monkeypatch: pytest.MonkeyPatch, vault: Path, staged: str, action) -> None:
    """Run ``action(resolved base)`` where the build first reads its verified base's parts: a build staged on its
    changes only (``core.build.delta_stage``) copies the generation tables; one staged on the whole base (a note
    only touched, more than ``RELINK_SHARE`` of the carried-over notes with no floor, sends it there) copies the
    base."""
    from core.build import delta_stage

    if staged == "changes":
        real_tables = delta_stage._copy_generation_tables

        def act_then_tables(conn: sqlite3.Connection, resolved: gen.ResolvedIndex) -> None:
            action(resolved)
            real_tables(conn, resolved)

        monkeypatch.setattr(delta_stage, "_copy_generation_tables", act_then_tables)
        return
    monkeypatch.setattr(delta_stage, "RELINK_FLOOR", 0)  # 1 touched note of 2: more than RELINK_SHARE
    touched = vault / "a.md"
    os.utime(touched, ns=(touched.stat().st_atime_ns, touched.stat().st_mtime_ns + 5_000_000_000))
    real_copy = gen.copy_base

    def act_then_copy(resolved: gen.ResolvedIndex, dest: Path) -> None:
        action(resolved)
        real_copy(resolved, dest)

    monkeypatch.setattr("core.build.incremental.copy_base", act_then_copy)


@pytest.mark.parametrize("staged", ["changes", "whole_base"])
def test_builder_refuses_a_base_doctored_after_verification(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, staged: str
) -> None:
    vault = _vault(tmp_path)
    first = build_index(vault)
    (vault / "c.md").write_text(note("Gamma", "gamma words"), encoding="utf-8")
    _before_base_read(monkeypatch, vault, staged, lambda resolved: _doctor_in_place(resolved.parts[0].path))
    with pytest.raises(IntegrityError) as info:
        build_index(vault)
    assert info.value.reason == "sha256_mismatch"  # staged on its changes too: a base not as verified is copied
    layout = gen.layout_for(vault)
    assert gen.active_record(layout)["generation_id"] == first.generation_id  # nothing published
    assert list(layout.staging_dir.iterdir()) == []


def _swap(resolved: gen.ResolvedIndex) -> None:
    fake = resolved.parts[0].path.with_name("fake.db")
    shutil.copyfile(resolved.parts[0].path, fake)
    _doctor_in_place(fake)
    os.replace(fake, resolved.parts[0].path)


@pytest.mark.parametrize("staged", ["changes", "whole_base"])
def test_builder_copies_the_verified_inode_when_the_path_is_swapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, staged: str
) -> None:
    vault = _vault(tmp_path)
    build_index(vault)
    (vault / "c.md").write_text(note("Gamma", "gamma words"), encoding="utf-8")
    _before_base_read(monkeypatch, vault, staged, _swap)
    report = build_index(vault)
    monkeypatch.undo()
    titles = {hit.title for hit in search_vault(vault, "words", mode="fts")}
    assert titles == {"Alpha", "Beta", "Gamma"}  # never the doctored upper-case titles
    assert report.generation_id == gen.resolve(gen.layout_for(vault)).generation_id
    assert report.whole_base_reason is not None  # the swapped base is copied from its verified descriptor


def test_embedder_refuses_a_base_doctored_after_verification(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest, tmp_path_factory
) -> None:
    pytest.importorskip("onnxruntime")
    from core.build.embed import embed_index
    from tests.minilm_fixture import FP32, cached_model_dirs, fixture_root

    model = cached_model_dirs(fixture_root(request, tmp_path_factory))[FP32]
    vault = _vault(tmp_path)
    first = build_index(vault)
    real_copy = gen.copy_base

    def doctor_then_copy(resolved: gen.ResolvedIndex, dest: Path) -> None:
        _doctor_in_place(resolved.parts[0].path)
        real_copy(resolved, dest)

    monkeypatch.setattr("core.build.incremental.copy_base", doctor_then_copy)
    with pytest.raises(IntegrityError) as info:
        embed_index(vault, model=model)
    assert info.value.reason == "sha256_mismatch"
    layout = gen.layout_for(vault)
    assert gen.active_record(layout)["generation_id"] == first.generation_id
    assert list(layout.staging_dir.iterdir()) == []


def test_without_proc_fd_the_path_fallback_is_checked(layout: IndexLayout, monkeypatch: pytest.MonkeyPatch) -> None:
    publish_db(layout, "a")
    resolved = gen.resolve(layout)
    monkeypatch.setattr(pinned, "FD_DIR", layout.index_dir / "no-such-dir")
    assert served_body(resolved) == GOOD  # opened by path, checked to be the pinned inode
    _replace(resolved.parts[0].path, doctored(layout, resolved.parts[0].path))
    with pytest.raises(GenerationChangedError):
        served_body(resolved)
