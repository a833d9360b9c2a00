"""Equal scores follow paths over generated histories (issue 29): after any sequence of writes, deletes
and renames, each followed by an incremental build, of notes many of which hold the same text (equal
scores) under paths whose order differs from their ids', every mode ranks (paths, scores, order, labels)
exactly as a cold build of the same files, for an unrestricted and a restricted caller."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.build.builder import build_index
from tests.conftest import note, write_files
from tests.index.test_tie_order import CALLERS, _results

PATHS = ("a.md", "k.md", "m.md", "x.md", "f/b.md", "f/z.md")
BODIES = (
    "A lantern, a quokka and an orchard.",
    "A lantern, a quokka and an orchard.\n\n[[m]]",
    "The orchard at night.\n\n[[a]] [[x]]",
)
RUNS = (("fts", False), ("vector", False), ("hybrid", False), ("graph_assisted", False), ("fts", True))

contents = st.tuples(st.sampled_from(BODIES), st.sampled_from(("public", "lan")))
operations = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(PATHS), contents),
    st.tuples(st.just("delete"), st.sampled_from(PATHS), st.none()),
    st.tuples(st.just("rename"), st.sampled_from(PATHS), st.sampled_from(PATHS)),
)


def _apply(root: Path, op: tuple) -> None:
    kind, rel, arg = op
    path = root / rel
    if kind == "write":
        write_files(root, {rel: note("Same", arg[0], classification=arg[1])})
    elif kind == "delete" and path.exists():
        path.unlink()
    elif kind == "rename" and path.exists() and not (root / arg).exists():
        (root / arg).parent.mkdir(parents=True, exist_ok=True)
        path.rename(root / arg)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(contents, min_size=len(PATHS), max_size=len(PATHS)), st.lists(operations, min_size=1, max_size=4))
def test_any_history_ranks_equal_scores_as_a_cold_build(start: list[tuple[str, str]], ops: list[tuple]) -> None:
    with tempfile.TemporaryDirectory(prefix="vs-ties-") as tmp:
        root = write_files(
            Path(tmp) / "vault", {p: note("Same", b, classification=c) for p, (b, c) in zip(PATHS, start)}
        )
        build_index(root)
        for op in ops:
            _apply(root, op)
            build_index(root)
        cold = Path(tmp) / "cold"
        shutil.copytree(root, cold, ignore=shutil.ignore_patterns(".vaultsearch"))
        build_index(cold)
        for mode, raw in RUNS:
            query = "lantern OR orchard" if raw else "orchard lantern"
            for classes in CALLERS:
                assert _results(root, query, mode, classes, raw) == _results(cold, query, mode, classes, raw), (
                    mode, raw, classes,
                )  # fmt: skip
