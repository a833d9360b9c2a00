"""Sequences of edits of notes that link to each other, each published incrementally: a content edit
keeps the note's id, so it publishes a delta (one segment, one tombstone) even when other notes link to
it; after every step the generation reads and ranks as a cold build of the same vault (issue 29).

Renames, deletes and alias changes can change how OTHER notes' links resolve: they may still publish the
whole generation as one segment (``incremental_links_changed``), and must read as a cold build too.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from core.build.builder import build_index
from core.index import verify
from core.index.layout import layout_for
from core.serve.tools import ServeConfig, Tools
from tests.conftest import EXAMPLE_VAULT
from tests.index.test_segmented import _tool_answers
from tests.index.test_segmented_search import _ranking

NAMES = ("alpha", "beta", "gamma", "delta")
WORDS = ("zebrafish", "quokka", "database", "meeting", "project", "search")
CONTENT_ONLY = ("edit", "relink")  # a delta every time: the note keeps its id, no other note's edges change
CALLERS = (None, ("public",))


def _text(rng: random.Random, name: str, names: list[str], aliases: bool = False) -> str:
    front = f"---\naliases: [{name.upper()}X]\n---\n" if aliases else ""
    links = " ".join(f"[[{n}]]" for n in rng.sample(names, min(2, len(names))) if n != name)
    return f"{front}# {name.title()}\n\n{' '.join(rng.sample(WORDS, 3))} {links}\n"


def _step(root: Path, rng: random.Random, op: str, names: list[str]) -> None:
    name = rng.choice(names)
    if op in CONTENT_ONLY:
        (root / f"{name}.md").write_text(_text(rng, name, names if op == "relink" else [n for n in names][:2]))
    elif op == "alias":
        (root / f"{name}.md").write_text(_text(rng, name, names, aliases=True))
    elif op == "add":
        new = f"new{len(names)}"
        (root / f"{new}.md").write_text(_text(rng, new, names))
        names.append(new)
    elif op == "rename" and len(names) > 2:
        (root / f"{name}.md").rename(root / f"{name}-moved.md")
        names[names.index(name)] = f"{name}-moved"
    elif op == "delete" and len(names) > 2:
        (root / f"{name}.md").unlink()
        names.remove(name)


def _answers(root: Path, names: list[str]) -> list:
    out: list = [
        _ranking(root, None, query, mode, classes)
        for mode in ("fts", "graph_assisted")
        for query in ("zebrafish quokka", "project database")
        for classes in CALLERS
    ]
    paths = [f"{n}.md" for n in names] + ["index.md"]
    for classes in (("lan", "public", "restricted"), ("public",)):
        out.append(_tool_answers(Tools(ServeConfig(root, classifications=classes)), paths))
    return out


@pytest.mark.parametrize(
    "ops",
    [
        ("edit", "edit", "relink", "edit", "add", "edit"),
        ("relink", "alias", "edit", "rename", "edit", "edit"),
        ("edit", "delete", "edit", "add", "relink", "edit"),
    ],
)
def test_edit_sequences_of_linked_notes_read_as_a_cold_build(tmp_path: Path, ops: tuple[str, ...]) -> None:
    rng = random.Random(str(ops))
    root = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, root)
    names = list(NAMES)
    for name in names:
        (root / f"{name}.md").write_text(_text(rng, name, names))
    build_index(root)
    for step, op in enumerate(ops):
        _step(root, rng, op, names)
        report = build_index(root)
        assert report.full_rebuild_reason is None, (step, op, report)
        if op in CONTENT_ONLY:
            assert report.one_segment_reason is None, (step, op, report.one_segment_reason)
            assert verify.resolve(layout_for(root)).parts[-1].kind == "tombstone"
        cold = tmp_path / f"cold{step}"
        shutil.copytree(root, cold, ignore=shutil.ignore_patterns(".vaultsearch"))
        build_index(cold)
        assert _answers(root, names) == _answers(cold, names), (step, op)
