"""A search from a new process loads only what searching needs (issue #14): no dense pipeline, model
catalog, onnxruntime, tqdm, YAML, multiprocessing or build module for an fts / vector / hybrid search."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.build.builder import build_index
from tests.conftest import note

NOT_FOR_LEXICAL_SEARCH = (
    "core.modes.dense_pipeline",
    "core.dense",
    "core.rerank",
    "core.models.catalog",
    "onnxruntime",
    "tokenizers",
    "tqdm",
    "yaml",
    "multiprocessing",
    "core.build.builder",
    "core.build.embed",
    "core.vault.scan",
    "core.vault.notes",
    "pathspec",
    "numpy.ma",  # np.unique's check for a masked array imports it (7-19 ms): core.ranking.postings.distinct
)
ROOT = Path(__file__).resolve().parents[1]


def loaded_by(code: str) -> set[str]:
    probe = f"import contextlib, io, json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_import_core_searcher_loads_no_dense_or_build_module() -> None:
    assert not loaded_by("import core.searcher") & set(NOT_FOR_LEXICAL_SEARCH)


# The freshness check's stat walk (core.index.freshness) lists the vault with the scanner; the note
# parser (and PyYAML) only for a problem found, pathspec only for a .vaultsearchignore.
FRESHNESS_WALK = {"core.vault.scan"}


@pytest.mark.parametrize("freshness", [False, True])
@pytest.mark.parametrize("mode", ["fts", "vector", "hybrid"])
@pytest.mark.parametrize("edited", [False, True])
def test_cli_lexical_search_loads_only_the_search_path(
    tmp_path: Path, mode: str, freshness: bool, edited: bool
) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "a.md").write_text(note("Alpha", "alpha beta gamma"), encoding="utf-8")
    (vault / "b.md").write_text(note("Beta", "alpha beta"), encoding="utf-8")
    build_index(vault)
    if edited:  # a segmented generation: a delta segment and a tombstone
        (vault / "b.md").write_text(note("Beta", "alpha beta delta"), encoding="utf-8")
        build_index(vault)
    extra = "" if freshness else ", '--no-freshness'"
    code = (
        "from core.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['search', {str(vault)!r}, 'alpha', '--mode', {mode!r}{extra}]) == 0\n"
    )
    loaded = loaded_by(code)
    assert "core.searcher" in loaded
    allowed = FRESHNESS_WALK if freshness else set()
    assert not loaded & (set(NOT_FOR_LEXICAL_SEARCH) - allowed), sorted(loaded & set(NOT_FOR_LEXICAL_SEARCH))


NOT_FOR_AN_EDIT = (
    "core.searcher",
    "core.registry",
    "core.modes.context",
    "core.modes.graph",
    "core.build.embed",
    "core.build.build_embed",
    "core.dense",
    "core.models.catalog",
    "onnxruntime",
    "tqdm",
    "importlib.metadata",
    "core.render",
    "multiprocessing",  # an edit's few notes are prepared in process (core.build.prepare_pool)
    "numpy.ma",  # np.unique's check for a masked array imports it (0.1-0.2 s): core.ranking.postings.distinct
)


def test_cli_index_after_an_edit_loads_no_search_or_dense_module(tmp_path: Path) -> None:
    """``vaultsearch index`` (no --embed, no progress bar) after a one-note edit: the build modules only, not
    the search modes, the dense side, tqdm, ``importlib.metadata`` or ``numpy.ma`` (issue 29: the edit path's
    start-up)."""
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "a.md").write_text(note("Alpha", "alpha beta gamma"), encoding="utf-8")
    (vault / "b.md").write_text(note("Beta", "beta"), encoding="utf-8")
    build_index(vault)
    (vault / "a.md").write_text(note("Alpha", "alpha beta gamma delta"), encoding="utf-8")
    code = (
        "from core.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['index', {str(vault)!r}, '--json']) == 0\n"
    )
    loaded = loaded_by(code)
    assert "core.build.builder" in loaded
    assert not loaded & set(NOT_FOR_AN_EDIT), sorted(loaded & set(NOT_FOR_AN_EDIT))
