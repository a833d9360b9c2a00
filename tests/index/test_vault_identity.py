"""Issue 11: which vault an index is of, and what a vault path must be.

- Two vaults sharing one index dir (an exported VAULTSEARCH_INDEX_DIR) fail closed with
  ``vault_mismatch`` when serving, verifying and building; the owner keeps serving.
- A vault moved with its default ``.vaultsearch`` inside keeps its index.
- A vault path that does not exist or is a file is a usage error (exit 2); ``index`` never
  creates it.
- A vault reached through a symlink that is retargeted serves the new target.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import write_files

from core import generations as gen
from core.build.builder import build_index
from core.cli import main
from core.errors import IntegrityError, UsageError
from core.index.status import index_status
from core.searcher import search_vault

NOTE = "---\ntitle: {t}\n---\n# {t}\n\n{body}\n"


def vault_with(root: Path, word: str) -> Path:
    return write_files(root, {f"{word}.md": NOTE.format(t=word, body=f"shared {word} words")})


@pytest.fixture
def shared(tmp_path: Path) -> tuple[Path, Path, Path]:
    gen.clear_verify_cache()
    a, b = vault_with(tmp_path / "a", "alpha"), vault_with(tmp_path / "b", "bravo")
    index_dir = tmp_path / "shared-index"
    build_index(a, index_dir=index_dir)
    return a, b, index_dir


def test_another_vault_never_serves_from_a_shared_index_dir(shared: tuple[Path, Path, Path]) -> None:
    a, b, index_dir = shared
    assert [r.rel_path for r in search_vault(a, "shared", index_dir=index_dir)] == ["alpha.md"]  # warm cache
    with pytest.raises(IntegrityError) as info:
        search_vault(b, "shared", index_dir=index_dir)
    assert info.value.reason == "vault_mismatch" and info.value.exit_code == 4


def test_verify_and_status_fail_closed_for_the_other_vault(shared: tuple[Path, Path, Path]) -> None:
    a, b, index_dir = shared
    with pytest.raises(IntegrityError) as info:
        gen.verify_full(gen.layout_for(b, index_dir))
    assert info.value.reason == "vault_mismatch"
    with pytest.raises(IntegrityError) as info:
        index_status(b, index_dir)
    assert info.value.reason == "vault_mismatch"
    assert gen.verify_full(gen.layout_for(a, index_dir))["generation_id"]


def test_building_another_vault_into_the_shared_dir_fails_closed_and_keeps_the_owner(
    shared: tuple[Path, Path, Path],
) -> None:
    a, b, index_dir = shared
    before = gen.resolve(gen.layout_for(a, index_dir)).generation_id
    with pytest.raises(IntegrityError) as info:
        build_index(b, index_dir=index_dir)
    assert info.value.reason == "vault_mismatch"
    gen.clear_verify_cache()
    assert gen.resolve(gen.layout_for(a, index_dir)).generation_id == before
    assert [r.rel_path for r in search_vault(a, "shared", index_dir=index_dir)] == ["alpha.md"]


def test_the_environment_variable_case_through_the_cli(
    shared: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b, index_dir = shared
    monkeypatch.setenv("VAULTSEARCH_INDEX_DIR", str(index_dir))
    assert main(["search", str(b), "shared", "--json"]) == 4
    assert json.loads(capsys.readouterr().err)["reason"] == "vault_mismatch"
    assert main(["verify", str(b), "--json"]) == 4
    assert json.loads(capsys.readouterr().err)["reason"] == "vault_mismatch"


def test_a_vault_moved_with_its_default_index_keeps_serving(tmp_path: Path) -> None:
    old = vault_with(tmp_path / "old", "alpha")
    build_index(old)
    new = tmp_path / "renamed"
    os.rename(old, new)
    gen.clear_verify_cache()
    assert [r.rel_path for r in search_vault(new, "shared")] == ["alpha.md"]
    assert build_index(new).up_to_date


# --- the vault path ----------------------------------------------------------------------------------------


def test_index_of_a_missing_vault_is_a_usage_error_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(UsageError) as info:
        build_index(missing)
    assert info.value.reason == "vault_missing"
    assert main(["index", str(missing), "--json"]) == 2
    assert json.loads(capsys.readouterr().err)["reason"] == "vault_missing"
    assert not missing.exists()


@pytest.mark.parametrize("command", ["index", "search", "status", "verify"])
def test_a_vault_path_that_is_a_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    path = write_files(tmp_path, {"note.md": "# just a file\n"}) / "note.md"
    argv = [command, str(path), *(["words"] if command == "search" else []), "--json"]
    assert main(argv) == 2
    assert json.loads(capsys.readouterr().err)["reason"] == "vault_not_directory"
    assert path.read_text() == "# just a file\n"


def test_a_retargeted_vault_symlink_serves_the_new_target(tmp_path: Path) -> None:
    a, b = vault_with(tmp_path / "a", "alpha"), vault_with(tmp_path / "b", "bravo")
    build_index(a)
    build_index(b)
    link = tmp_path / "current"
    link.symlink_to(a)
    assert [r.rel_path for r in search_vault(link, "shared")] == ["alpha.md"]
    link.unlink()
    link.symlink_to(b)
    assert [r.rel_path for r in search_vault(link, "shared")] == ["bravo.md"]
