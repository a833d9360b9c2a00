"""A hypothesis property (issue 29, "Must show"): for any sequence of adds, edits, deletes, renames (each
published by ``build_index`` on a small vault: delta segments and tombstones, or a one-segment fallback) and
merges (``optimize_index`` by the policy or into one segment), search_vault ranks exactly as a cold build of
the same live notes: paths, scores, order and mode labels, in every mode, for restricted and unrestricted
callers."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.build.builder import build_index
from core.build.optimize import optimize_index
from tests.conftest import note, write_vault
from tests.index.test_merge import answers

WORDS = ("alpha", "beta", "gamma", "delta", "postgres", "index", "meeting", "vault")
QUERIES = ("alpha", "postgres index", "gamma delta", "meet", "vault alpha beta")
CALLERS = (None, ("public",))
CLASSES = ("public", "lan")

_word = st.sampled_from(WORDS)
_body = st.lists(_word, min_size=1, max_size=6).map(" ".join)
_slot = st.integers(0, 5)
_op = st.one_of(
    st.tuples(st.just("add"), _slot, _body, st.sampled_from(CLASSES)),
    st.tuples(st.just("edit"), _slot, _body, st.sampled_from(CLASSES)),
    st.tuples(st.just("delete"), _slot),
    st.tuples(st.just("rename"), _slot, _slot),
    st.tuples(st.just("link"), _slot, _slot),
    st.tuples(st.just("merge"), st.booleans()),
)


def _text(name: str, body: str, classification: str, link: str | None = None) -> str:
    return note(name, body + (f" see [[{link}]]" if link else ""), classification=classification)


def _apply(root: Path, op: tuple) -> None:
    kind = op[0]
    path = root / f"n{op[1]}.md"
    if kind in ("add", "edit"):
        if kind == "edit" and not path.exists():
            return
        path.write_text(_text(path.stem, op[2], op[3]), encoding="utf-8")
    elif kind == "delete":
        path.unlink(missing_ok=True)
    elif kind == "rename":
        target = root / f"n{op[2]}.md"
        if path.exists() and not target.exists():
            path.rename(target)
    elif kind == "link" and path.exists():
        path.write_text(path.read_text(encoding="utf-8") + f"\nsee [[n{op[2]}]]\n", encoding="utf-8")
    if kind != "merge":
        build_index(root)
    else:
        optimize_index(root, one_segment=op[1], grace_s=0.0)


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(_op, min_size=1, max_size=7))
def test_any_sequence_of_changes_and_merges_ranks_as_a_cold_build(ops: list[tuple]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = write_vault(
            Path(tmp) / "vault",
            {
                "n0.md": _text("n0", "alpha beta postgres", "public", "n1"),
                "n1.md": _text("n1", "gamma index vault", "lan"),
                "n2.md": _text("n2", "meeting delta alpha", "public"),
            },
        )
        build_index(root)
        for op in ops:
            _apply(root, op)
        cold = Path(tmp) / "cold"
        shutil.copytree(root, cold, ignore=shutil.ignore_patterns(".vaultsearch"))
        build_index(cold)
        assert answers(root, None, QUERIES, CALLERS) == answers(cold, None, QUERIES, CALLERS), ops
