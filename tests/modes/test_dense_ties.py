"""The dense modes order equal scores by the note's path too (issue 29): notes with identical text (equal
cosines, equal reranker scores) under paths whose order differs from their ids' after incremental builds
rank as in a cold build of the same notes, in semantic, auto and reranked, unrestricted and restricted.

Real MiniLM weights (tests/minilm_fixture.py); the "reranker" is the pair fixture."""

from __future__ import annotations

import shutil
from pathlib import Path

from core.build.builder import build_index
from core.build.embed import embed_index
from core.ranking.filters import Filters
from core.searcher import search_vault
from tests.conftest import note, write_files
from tests.index.test_tie_order import _IDENTITY
from tests.minilm_fixture import FP32, PAIR

_TEXT = "The puppy chased a red ball across the park lawn."


def _dup(classification: str) -> str:
    return note("Outing", _TEXT, classification=classification)


def _results(vault: Path, mode: str, classes: tuple[str, ...] | None, options: dict) -> list[dict]:
    filters = Filters(classifications=classes) if classes is not None else None
    found = search_vault(vault, "a dog playing with a ball", 10, mode=mode, freshness=False, filters=filters,
                         options=options)  # fmt: skip
    return [{k: v for k, v in h.to_dict().items() if k not in _IDENTITY} for h in found.hits]


def test_dense_ties_follow_paths_after_incremental_builds(tmp_path: Path, model_dirs: dict[str, Path]) -> None:
    root = write_files(
        tmp_path / "vault",
        {
            "m.md": _dup("public"),
            "k.md": _dup("public"),
            "x.md": _dup("lan"),
            "b.md": _dup("public"),
            "other.md": note("Dinner", "Boil the pasta in salted water.", classification="public"),
        },
    )
    build_index(root)
    (root / "b.md").write_text(_dup("public") + "\nmore\n")
    build_index(root)
    (root / "k.md").unlink()
    build_index(root)
    write_files(root, {"k.md": _dup("public"), "a.md": _dup("public"), "b.md": _dup("public")})
    build_index(root)
    (root / "x.md").rename(root / "c.md")
    build_index(root)
    embed_index(root, model=model_dirs[FP32])
    cold = tmp_path / "cold"
    shutil.copytree(root, cold, ignore=shutil.ignore_patterns(".vaultsearch"))
    build_index(cold)
    embed_index(cold, model=model_dirs[FP32])
    options = {"reranker": str(model_dirs[PAIR])}
    for mode in ("semantic", "auto", "reranked", "hybrid"):
        for classes in (None, ("public",)):
            got = _results(root, mode, classes, options)
            assert len(got) >= 4 and got == _results(cold, mode, classes, options), (mode, classes)
