"""Table SQL lives with its table (issue #10): every SQL statement of ``core/`` is in ``core/index/tables/``.

The scan reads each module of ``core/`` outside the tables package and fails listing every string
literal (or f-string) that is an SQL statement - it starts with SELECT, INSERT, UPDATE, DELETE,
CREATE, WITH, REPLACE, DROP or ALTER and names a table, or it is a PRAGMA or a transaction
statement - and every direct ``execute`` / ``executemany`` / ``executescript`` call: call sites
call the named functions of the table modules instead.

The functions that replaced the inline statements of the last files to move return what those
statements returned (``test_the_table_functions_return_what_the_inline_sql_returned``).
"""

from __future__ import annotations

import ast
import json
import re
import sqlite3
import zlib
from pathlib import Path

import pytest
from conftest import with_working
from hypothesis import given, settings
from hypothesis import strategies as st

from core import generations as gen
from core.index.tables import (
    chunk_vectors,
    chunks,
    connection,
    links,
    meta,
    notes,
    notes_fts,
    skipped_files,
    term_major,
    terms,
    word_scratch,
)
from core.ranking.chunk_vectors import CHUNK_GROUP
from core.ranking.filters import Filters

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "core"
TABLES = CORE / "index" / "tables"

_STATEMENT = re.compile(r"\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|WITH|REPLACE|DROP|ALTER)\s")
_NAMES_TABLE = re.compile(r"\b(FROM|INTO|TABLE|INDEX|VIEW|TRIGGER|JOIN)\s|^\s*UPDATE\s+[\w.]+\s+SET\b")
_CONNECTION = re.compile(r"\s*(PRAGMA|BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE)\b")
_EXECUTE = {"execute", "executemany", "executescript"}


def _text(node: ast.AST) -> str | None:
    """The text of a string literal, or of an f-string with ``{}`` for each placeholder."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def is_sql_statement(text: str) -> bool:
    """An SQL statement that names a table, or a PRAGMA / transaction statement."""
    return bool((_STATEMENT.match(text) and _NAMES_TABLE.search(text)) or _CONNECTION.match(text))


def sql_sites(source: str) -> list[tuple[int, str]]:
    """(line, what) of every SQL statement literal and every direct execute call in ``source``."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    found = []
    for node in ast.walk(tree):
        if id(node) in skip or id(node) in parts:
            continue
        text = _text(node)
        if text is not None and is_sql_statement(text):
            found.append((node.lineno, " ".join(text.split())[:100]))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _EXECUTE:
            found.append((node.lineno, f".{node.func.attr}(...)"))
    return sorted(found)


def sites_by_file() -> dict[str, list[tuple[int, str]]]:
    out = {}
    for path in sorted(CORE.rglob("*.py")):
        if TABLES in path.parents:
            continue
        found = sql_sites(path.read_text(encoding="utf-8"))
        if found:
            out[path.relative_to(ROOT).as_posix()] = found
    return out


def test_no_sql_outside_the_table_modules() -> None:
    stray = sites_by_file()
    listing = "\n".join(f"  {f}:{line}: {what}" for f, sites in stray.items() for line, what in sites)
    assert not stray, f"SQL outside core/index/tables/ (call a table module's function instead):\n{listing}"


def test_the_scan_finds_statements_and_leaves_text_and_clauses_alone() -> None:
    source = '''
"""SELECT id FROM notes in a docstring is prose."""
A = "SELECT id FROM notes WHERE id = ?"
B = f"DELETE FROM {table} WHERE {col} IN (SELECT id FROM temp.gone)"
C = "UPDATE notes SET mtime_ns = ? WHERE id = ?"
D = "PRAGMA journal_mode=DELETE"
E = "n.id IN (SELECT t.note_id FROM note_tags t)"
F = "with --source git: the revision to index"
G = "Select the notes to show"
conn.executemany(INSERT, rows)
'''
    assert [line for line, _ in sql_sites(source)] == [3, 4, 5, 6, 10]


# ---------------------------------------------------------------- the functions that replaced inline SQL


def _rows(conn: sqlite3.Connection, sql: str, args: object = ()) -> list[tuple]:
    return [tuple(r) for r in conn.execute(sql, args)]  # type: ignore[arg-type]


@pytest.fixture
def served(example_vault: Path) -> sqlite3.Connection:
    conn = gen.connect_readonly(gen.resolve(gen.layout_for(example_vault)))
    yield conn
    conn.close()


def test_the_table_functions_return_what_the_inline_sql_returned(served: sqlite3.Connection) -> None:
    """Each function against the statement its call site ran before it moved (copied verbatim)."""
    conn = served
    clause, vals = Filters.make(classifications=["public"]).visible_classification_clause()
    visible = (clause, list(vals))
    note_id, rel = _rows(conn, "SELECT id, rel_path FROM notes ORDER BY id LIMIT 1")[0]
    # core/index/freshness.py
    assert [tuple(r) for r in skipped_files.source_mtime_sizes(conn)] == _rows(
        conn, "SELECT rel_path, mtime_ns, size FROM notes UNION ALL SELECT rel_path, mtime_ns, size FROM skipped_files"
    )
    skipped = _rows(conn, "SELECT rel_path FROM skipped_files")
    paths = (rel, *(p for (p,) in skipped), "no/such.md", *(f"x{i}.md" for i in range(600)))  # two statements
    marks = ",".join("?" * len(paths))
    assert [tuple(r) for r in skipped_files.classified_source_stats_of(conn, paths)] == _rows(
        conn,
        f"SELECT rel_path, lower(hex(content_sha256)), mtime_ns, size, lower(classification), 1 FROM notes "
        f"WHERE rel_path IN ({marks}) UNION ALL SELECT rel_path, lower(hex(content_sha256)), mtime_ns, size, NULL, 0 "
        f"FROM skipped_files WHERE rel_path IN ({marks})",
        [*paths, *paths],
    )
    assert list(skipped_files.classified_source_stats_of(conn, ())) == []
    limit = conn.execute("SELECT value FROM meta WHERE key = 'max_note_bytes'").fetchone()
    assert meta.meta_value(conn, "max_note_bytes") == json.loads(limit[0])
    assert meta.meta_value(conn, "no such key") is None
    source = conn.execute("SELECT value FROM meta WHERE key = 'source'").fetchone()
    assert meta.meta_value(conn, "source") == (json.loads(source[0]) if source else None)
    assert notes.count_notes(conn) == conn.execute("SELECT count(*) FROM notes").fetchone()[0]
    assert [tuple(r) for r in notes.note_classifications(conn)] == _rows(
        conn, "SELECT rel_path, lower(classification) FROM notes"
    )
    # core/modes/lexical.py
    assert notes_fts.matching_rowids(conn, '"postgres"') == _rows(
        conn, "SELECT rowid FROM notes_fts WHERE notes_fts MATCH ?", ('"postgres"',)
    )
    assert notes_fts.matching_note_ids(conn, "pool OR incident", clause, vals) == [
        r[0]
        for r in conn.execute(
            f"SELECT n.id FROM notes_fts JOIN notes n ON n.id = notes_fts.rowid "
            f"WHERE notes_fts MATCH ? AND {clause} ORDER BY n.id",
            ["pool OR incident", *vals],
        )
    ]
    with pytest.raises(sqlite3.OperationalError):
        notes_fts.matching_note_ids(conn, '"unbalanced', "1", [])
    # core/ranking/sparse.py (the writer's working tables, filled from the stored arrays)
    with_working(conn)
    where = f" WHERE note_id IN (SELECT n.id FROM notes n WHERE {clause})"
    for vis, w, v in ((None, "", []), (visible, where, list(vals))):
        assert notes.visible_rows(vis) == (w, v)
        stored = _rows(conn, f"SELECT note_id, n_terms, data FROM note_terms{w} ORDER BY note_id", v)
        assert terms.note_terms_size(conn, vis) == (len(stored), 4 * sum(r[1] for r in stored))
        assert [tuple(r) for r in terms.note_term_rows(conn, vis)] == [
            (nid, zlib.decompress(data)[: 4 * n], zlib.decompress(data)[4 * n :]) for nid, n, data in stored
        ]
    assert terms.term_dictionary(conn) == dict(conn.execute("SELECT term, id FROM terms"))
    with connection.read_snapshot(conn):
        assert conn.in_transaction
    assert not conn.in_transaction
    # core/ranking/stored.py
    assert term_major.has_term_major(conn)
    group = CHUNK_GROUP
    listing = _rows(
        conn,
        "SELECT name, dtype, shape, length(data) FROM term_major WHERE name >= ? AND name < ?",
        (group + "/", group + "0"),
    )
    assert listing and [tuple(r) for r in term_major.group_listing(conn, group)] == listing
    name = listing[0][0]
    assert (
        term_major.read_data(conn, name)
        == conn.execute("SELECT data FROM term_major WHERE name = ?", (name,)).fetchone()[0]
    )
    assert term_major.read_data(conn, group + "/no-such-array") is None
    # core/serve/tools.py
    assert notes.visible_note_at(conn, rel, clause, vals) == tuple(
        conn.execute(
            f"SELECT n.id, n.rel_path, n.title, lower(hex(n.content_sha256)), n.body_line FROM notes n "
            f"WHERE n.rel_path = ? AND {clause}",
            [rel, *vals],
        ).fetchone()
    )
    assert notes.visible_note_at(conn, "no/such.md", clause, vals) is None
    assert notes.visible_titles(conn, clause, vals) == {
        r[0]: (r[1], r[2]) for r in conn.execute(f"SELECT n.id, n.rel_path, n.title FROM notes n WHERE {clause}", vals)
    }
    assert list(links.out_edges(conn, note_id)) == _rows(
        conn, "SELECT kind, dst_id FROM edges WHERE src_id = ? AND dst_id IS NOT NULL", [note_id]
    )
    assert list(links.in_edges(conn, note_id)) == _rows(
        conn, "SELECT kind, src_id FROM edges WHERE dst_id = ?", [note_id]
    )
    assert list(links.unresolved_targets(conn, note_id)) == _rows(
        conn, "SELECT target, kind FROM edges WHERE src_id = ? AND dst_id IS NULL", [note_id]
    )
    one = lambda sql: conn.execute(sql.format(w=clause), vals).fetchone()[0]  # noqa: E731
    assert notes.count_visible_notes(conn, clause, vals) == one("SELECT count(*) FROM notes n WHERE {w}")
    assert chunks.count_visible_chunks(conn, clause, vals) == one(
        "SELECT count(*) FROM chunks c JOIN notes n ON n.id = c.note_id WHERE {w}"
    )
    assert chunk_vectors.count_visible_vectors(conn, clause, vals) == one(
        "SELECT count(*) FROM chunk_vectors v JOIN chunks c ON c.id = v.chunk_id JOIN notes n ON n.id = c.note_id WHERE {w}"
    )


def test_the_word_scratch_table_tokenises_as_the_analyser_did() -> None:
    """core/ranking/analysis.py: the scratch table's tokens, row by row, column by column."""
    conn = sqlite3.connect(":memory:")
    insert = word_scratch.create_word_tables(conn, ("c0", "c1"), "porter unicode61 remove_diacritics 2")
    assert insert == "INSERT INTO w(rowid, c0, c1) VALUES (?, ?, ?)"
    assert word_scratch.tokenise_rows(conn, insert, [(0, "Running", "Café"), (1, "", "mice")]) == [
        (0, "c0", "run"),
        (0, "c1", "cafe"),
        (1, "c1", "mice"),
    ]
    assert conn.execute("SELECT count(*) FROM temp.wi").fetchone()[0] == 0  # left empty for the next batch
    with pytest.raises(ValueError):
        word_scratch.create_word_tables(sqlite3.connect(":memory:"), ("c0",), "porter' unicode61")


def test_holds_files_under_a_folder_is_by_path_prefix_not_by_name(served: sqlite3.Connection) -> None:
    """The watcher's question for a changed folder (core/build/watch.py): anything indexed under it?"""
    rel = served.execute("SELECT rel_path FROM notes WHERE rel_path LIKE '%/%' LIMIT 1").fetchone()[0]
    folder = rel.rsplit("/", 1)[0]
    assert notes.holds_files_under(served, folder)
    assert not notes.holds_files_under(served, folder + "x")  # a sibling whose name extends it
    assert not notes.holds_files_under(served, "no-such-folder")


def test_moving_edges_follows_reinserted_notes_to_their_new_ids_in_one_step() -> None:
    """``links.move_edges(conn, {old id: new id})``: edges into a re-inserted note follow it; a new id that is
    another moved note's old id is not moved twice; every other edge is left as it is."""
    conn = sqlite3.connect(":memory:")
    conn.execute(links.DDL_EDGES)
    rows = [(1, 2, "wikilink", None), (2, 3, "wikilink", None), (1, 5, "wikilink", None)]  # b.md, c.md, e.md
    links.insert_edges(conn, [*rows, (1, None, "wikilink", "x"), (3, 9, "wikilink", None)])
    links.move_edges(conn, {3: 5, 5: 6, 2: 2})  # c.md 3 -> 5, e.md 5 -> 6 (not on to 6 via 5), b.md stays
    got = conn.execute("SELECT dst_id, target FROM edges ORDER BY rowid").fetchall()
    assert got == [(2, None), (5, None), (6, None), (None, "x"), (9, None)]


_JSON_VALUES = st.one_of(
    st.lists(st.text(max_size=8), max_size=5).map(tuple),
    st.lists(st.text(max_size=8), max_size=5),
    st.dictionaries(st.text(max_size=5), st.one_of(st.none(), st.integers(), st.text(max_size=5)), max_size=4),
)


@settings(max_examples=300, deadline=None)
@given(_JSON_VALUES)
def test_a_json_cell_is_the_text_json_dumps_gives(value) -> None:
    """Tags, aliases, extra and heading paths keep exactly the text ``json.dumps`` wrote before the
    joined fast path (non-ASCII, quotes, control characters and lone surrogates included)."""
    expected = json.dumps(list(value) if isinstance(value, tuple) else value, ensure_ascii=False, sort_keys=True)
    assert notes.json_cell(value) == expected
