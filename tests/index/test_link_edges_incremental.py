"""Incremental link resolution (``core.build.link_graph``) equals resolving every link from scratch.

Over generated sequences of adds, edits, deletes, renames and alias changes in a small vault whose
notes link to each other (same names in several folders, case variants, Dendron names, aliases,
relative and folder-qualified targets, missing targets, ``supersedes``), every incremental build's
edges and what follows from them (edge counts, the notes the default filters hide as superseded)
equal those of a cold build of the same files.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from unittest.mock import patch

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core import generations as gen
from core.build.builder import build_index
from core.generations import layout_for
from core.index.tables import links as links_table
from core.index.tables.links import edge_counts
from core.ranking.filters import Filters

FOLDERS = ("", "a/", "a/c/")
STEMS = ("x", "X", "y", "x.y")  # one Dendron name in four: the reading of [[l|r]] flips seldom
TARGETS = ("x", "X", "y", "a/x", "c/y", "../x", "./y", "x.y", "x.md", "c/x", "x/..", "first", "Second", "nope")
ALIASES = ("first", "second", "x", "Y")

paths = st.builds(lambda f, s: f + s + ".md", st.sampled_from(FOLDERS), st.sampled_from(STEMS))
link_forms = st.sampled_from(("[[{}]]", "[[{}|label]]", "[[label|{}]]", "![[{}]]", "[m](<{}.md>)", "[[{}#Head]]"))
links = st.lists(st.builds(str.format, link_forms, st.sampled_from(TARGETS)), max_size=4)
aliases = st.lists(st.sampled_from(ALIASES), max_size=2, unique=True)
contents = st.builds(
    lambda a, s, ln: (tuple(a), tuple(s), tuple(ln)), aliases, st.lists(st.sampled_from(TARGETS), max_size=2), links
)
operations = st.one_of(
    st.tuples(st.just("write"), paths, contents),  # an add, or an edit of content, aliases, links
    st.tuples(st.just("delete"), paths, st.none()),
    st.tuples(st.just("rename"), paths, paths),
    st.tuples(st.just("aliases"), paths, aliases),  # the same links, other aliases
)


class Vault:
    """The generated vault on disk, each write with an mtime of its own."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: dict[str, tuple] = {}
        self.clock = time.time() - 100_000

    def write(self, rel: str, content: tuple) -> None:
        names, supersedes, body = content
        front = f"aliases: {json.dumps(list(names))}\nsupersedes: {json.dumps(list(supersedes))}\n"
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"---\n{front}---\n# Head\n\n{' '.join(body)}\n", encoding="utf-8")
        self.clock += 1
        os.utime(path, (self.clock, self.clock))
        self.files[rel] = content

    def apply(self, op: tuple) -> None:
        kind, rel, arg = op
        if kind == "write":
            self.write(rel, arg)
        elif rel not in self.files:
            return
        elif kind == "delete":
            (self.root / rel).unlink()
            del self.files[rel]
        elif kind == "rename" and arg not in self.files:
            (self.root / arg).parent.mkdir(parents=True, exist_ok=True)
            (self.root / rel).rename(self.root / arg)
            self.files[arg] = self.files.pop(rel)
        elif kind == "aliases":
            self.write(rel, (tuple(arg), *self.files[rel][1:]))


def link_state(vault: Path, index_dir: Path) -> dict[str, object]:
    """The edges by path (the dst note's path by its id, the target an unresolved edge stores), their counts, the
    notes the default filters let through (not superseded), and the lookup keys by path (none left over)."""
    conn = gen.connect_readonly(gen.resolve(layout_for(vault, index_dir)))
    try:
        return _state(conn)
    finally:
        conn.close()


def _state(conn: sqlite3.Connection) -> dict[str, object]:
    edges = conn.execute(
        "SELECT s.rel_path, d.rel_path, e.kind, e.target FROM edges e JOIN notes s ON s.id = e.src_id "
        "LEFT JOIN notes d ON d.id = e.dst_id"
    ).fetchall()
    clause, values = Filters().where()
    shown = conn.execute(f"SELECT n.rel_path FROM notes n WHERE {clause}", values).fetchall()
    keys = {
        table: sorted(
            conn.execute(f"SELECT k.key, n.rel_path FROM {table} k LEFT JOIN notes n ON n.id = k.note_id"), key=repr
        )
        for table in ("link_keys", "target_keys")
    }
    return {"edges": sorted(edges, key=repr), "counts": edge_counts(conn), "shown": sorted(shown), **keys}


NONE: tuple = ((), (), ())


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
# a content-only edit of a linked note (it keeps its id: its in-links stay as they are); a note added under a name,
# then an alias, a linked note already has (ambiguity, supersession); renames of a linked note; a note
# named by no key of the link's own (``x/..`` from ``a/c/`` is ``a/c.md``)
@example({"x.md": ((), (), ("[[y]]",)), "y.md": NONE}, [("write", "y.md", ((), (), ("[[x]]",)))])
@example(
    {"x.md": ((), ("first",), ("[[first]]", "[[y]]")), "a/y.md": NONE},
    [("write", "y.md", (("first",), (), ())), ("aliases", "a/y.md", ("first",)), ("aliases", "y.md", ("Y",))],
)
@example({"x.md": (("y",), (), ("[[y]]", "[m](<y.md>)")), "y.md": NONE}, [("rename", "y.md", "a/y.md")] * 2)
@example(
    {"x.md": NONE, "a/c/x.md": ((), (), ("[[x]]", "[[../x]]"))},
    [("rename", "x.md", "a/x.md"), ("delete", "a/x.md", None)],
)
@example({"a/c/y.md": ((), (), ("[[x/..]]",)), "x.md": NONE}, [("write", "a/c.md", NONE)])  # a path by ``..``
@given(st.dictionaries(paths, contents, min_size=2, max_size=6), st.lists(operations, min_size=1, max_size=5))
def test_incremental_edges_equal_a_cold_build_after_any_change(initial: dict[str, tuple], ops: list[tuple]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _same_as_cold(Path(tmp), initial, ops)


def _same_as_cold(tmp: Path, initial: dict[str, tuple], ops: list[tuple]) -> list[dict[str, object]]:
    """Each operation built incrementally and cold: the link states equal (and are returned, in order)."""
    vault = Vault(tmp / "vault")
    for rel, content in initial.items():
        vault.write(rel, content)
    build_index(vault.root, index_dir=tmp / "inc")
    states = []
    for step, op in enumerate(ops):
        vault.apply(op)
        build_index(vault.root, index_dir=tmp / "inc")
        build_index(vault.root, index_dir=tmp / f"cold{step}")
        states.append(link_state(vault.root, tmp / "inc"))
        assert states[-1] == link_state(vault.root, tmp / f"cold{step}"), (step, op)
    return states


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@example({"x.md": ((), (), ("[[y]]",)), "a/y.md": NONE}, [("write", "y.md", NONE), ("delete", "a/y.md", None)])
@example({"x.md": ((), (), ("[[first]]",)), "y.md": NONE}, [("aliases", "y.md", ("first",))])
@given(st.dictionaries(paths, contents, min_size=2, max_size=5), st.lists(operations, min_size=1, max_size=3))
def test_lookup_keys_sharing_a_hash_change_no_edge(initial: dict[str, tuple], ops: list[tuple]) -> None:
    """``link_keys`` and ``target_keys`` store a key's 64-bit hash: two keys of one hash may only add notes to
    a lookup (more links resolved again, more candidate targets), never change an edge. Every key hashed
    alike (the worst case), incremental builds still equal cold ones."""
    with tempfile.TemporaryDirectory() as tmp, patch.object(links_table, "key_hash", lambda key: 7):
        for state in _same_as_cold(Path(tmp), initial, ops):
            assert {key for key, _ in state["link_keys"] + state["target_keys"]} <= {7}  # type: ignore[operator]


def test_a_lookup_key_is_stored_as_a_stable_63_bit_hash() -> None:
    """The stored form is part of the index format: the same in every process (not Python's salted ``hash``),
    non-negative, and exact through the JSON the lookups bind."""
    keys = ["", "x", "X", "a/c.md", "dendron://dendron.dendron-site/community.concepts", "ü" * 40]
    hashes = [links_table.key_hash(k) for k in keys]
    assert (hashes[1], hashes[0]) == (2697552496229297191, 8238016292129134938)  # a change is a new schema version
    assert all(0 <= h < 2**63 for h in hashes) and len(set(hashes)) == len(keys)
    conn = sqlite3.connect(":memory:")
    back = [r[0] for r in conn.execute("SELECT value FROM json_each(?)", (json.dumps(hashes),))]
    assert back == hashes
